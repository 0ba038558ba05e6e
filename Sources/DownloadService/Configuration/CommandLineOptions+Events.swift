// The options of `GET /events`.
extension CommandLineOptions {
    static let eventOptions: [Option] = [
        Option(flag: "--max-event-subscribers", metavar: "N", help: "GET /events streams at once, as many again for the admin token; more get 503 (default 1024)") { c, v throws(ParseError) in
            guard let n = Int(v), n >= 1 else { throw ParseError(message: "--max-event-subscribers must be a positive number, got '\(v)'") }
            c.maxEventSubscribers = n
        },
    ]
}
