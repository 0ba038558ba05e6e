import Foundation
import MiniHTTPServer

// CPU priority: the shared transfers and the API before the threads that serve copies of what the
// transfers produced (bulk loops: SSE streams, file and /fetch bodies).
extension CommandLineOptions {
    static let priorityOptions: [Option] = [
        Option(flag: "--serving-nice", metavar: "N",
               help: "nice value (0-19) of the serving loops, the HTTP threads that write long bodies (SSE, file and /fetch bodies); transfers, hashing, writing and the API keep the process's priority (default 10; 0: same priority)") { c, v throws(ParseError) in
            c.servingNice = try servingNice(v)
        },
        Option(flag: "--serving-cpu-share", metavar: "PERCENT",
               help: "while a CPU holds the fetches back (their hashing waits for a core and their transfers for a free buffer), each serving loop keeps at most this share of a core, sleeping after each millisecond it ran, so copies of the bytes do not slow the fetch that makes them (1-100, default 20; 100: never gives way)") { c, v throws(ParseError) in
            c.servingCPUShare = try servingCPUShare(v)
        },
        Option(flag: "--serving-loops", metavar: "N",
               help: "serving loops (0-\(maxServingLoops)): threads long bodies move to after the API loop answered (default 1; 0: every body stays on the API loop)") { c, v throws(ParseError) in
            c.servingLoops = try servingLoops(v)
        },
    ]

    /// The most `--serving-loops` accepted.
    static let maxServingLoops = 16

    /// `--serving-nice`: a whole number within 0...`ThreadNice.maximum`.
    static func servingNice(_ v: String) throws(ParseError) -> Int {
        guard let n = Int(v.trimmingCharacters(in: .whitespaces)), (0...ThreadNice.maximum).contains(n) else {
            throw ParseError(message: "--serving-nice must be 0-\(ThreadNice.maximum), got '\(v)'")
        }
        return n
    }

    /// `--serving-cpu-share`: a whole percentage within 1...100.
    static func servingCPUShare(_ v: String) throws(ParseError) -> Int {
        guard let n = Int(v.trimmingCharacters(in: .whitespaces)), (1...100).contains(n) else {
            throw ParseError(message: "--serving-cpu-share must be 1-100, got '\(v)'")
        }
        return n
    }

    /// `--serving-loops`: a whole number within 0...`maxServingLoops`.
    static func servingLoops(_ v: String) throws(ParseError) -> Int {
        guard let n = Int(v.trimmingCharacters(in: .whitespaces)), (0...maxServingLoops).contains(n) else {
            throw ParseError(message: "--serving-loops must be 0-\(maxServingLoops), got '\(v)'")
        }
        return n
    }
}
