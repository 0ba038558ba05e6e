import Foundation
import MiniHTTPServer

// CPU priority: the shared transfers before the threads that serve copies of what they produced.
extension CommandLineOptions {
    static let priorityOptions: [Option] = [
        Option(flag: "--serving-nice", metavar: "N",
               help: "nice value (0-19) of the HTTP event-loop threads (SSE, file and /fetch bodies, the API); transfers, hashing and writing keep the process's priority (default 0: off)") { c, v throws(ParseError) in
            c.servingNice = try servingNice(v)
        },
    ]

    /// `--serving-nice`: a whole number within 0...`ThreadNice.maximum`.
    static func servingNice(_ v: String) throws(ParseError) -> Int {
        guard let n = Int(v.trimmingCharacters(in: .whitespaces)), (0...ThreadNice.maximum).contains(n) else {
            throw ParseError(message: "--serving-nice must be 0-\(ThreadNice.maximum), got '\(v)'")
        }
        return n
    }
}
