// The options about coalescing (issue 15): query parameters left out of the coalescing key.
extension CommandLineOptions {
    static let coalescingOptions: [Option] = [
        Option(flag: "--coalesce-ignore-query", metavar: "NAMES",
               help: "query parameters left out of the coalescing key, exact names, comma-separated (e.g. X-Amz-Signature,Expires); redacted in snapshots and logs (default none)") { c, v throws(ParseError) in
            let names = v.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            guard !names.isEmpty else { throw ParseError(message: "--coalesce-ignore-query needs parameter names") }
            if let bad = names.first(where: { !isQueryName($0) }) {
                throw ParseError(message: "--coalesce-ignore-query: '\(bad)' is not a query parameter name (no &, =, ?, #, / or spaces)")
            }
            c.coalesceIgnoreQuery += names
        },
    ]

    /// A name as it is written in a query (compared exactly, case-sensitively, before any decoding).
    static func isQueryName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 256
            && name.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7F && !"&=?#/".unicodeScalars.contains($0) }
    }
}
