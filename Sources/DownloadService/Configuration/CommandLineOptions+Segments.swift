import DownloaderEngine

// The options about segmented fetch (ranged connections per download).
extension CommandLineOptions {
    /// The most a caller may ask for; the operator's limit is at most this too.
    static let connectionsCeiling = 16

    static let segmentOptions: [Option] = [
        Option(flag: "--max-connections-per-download", metavar: "N",
               help: "ranged connections one download may use when its caller asks (1-16; default 1: off, as more connections per client get clients banned)") { c, v throws(ParseError) in
            guard let n = Int(v), (1...connectionsCeiling).contains(n) else {
                throw ParseError(message: "--max-connections-per-download must be 1-\(connectionsCeiling), got '\(v)'")
            }
            c.maxConnectionsPerDownload = n
        },
        Option(flag: "--segment-probe-seconds", metavar: "SEC",
               help: "a segmented download runs twice this long on one connection (warm-up, then its rate alone), then a second one probes whether more connections bring more (default 0.25; 0: all at once)") { c, v throws(ParseError) in
            c.segmentProbeSeconds = try seconds(v, "--segment-probe-seconds", within: 0...60)
        },
    ]
}
