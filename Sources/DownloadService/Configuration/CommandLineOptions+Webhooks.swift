import Foundation

// The options about completion webhooks.
extension CommandLineOptions {
    static let webhookOptions: [Option] = [
        Option(flag: "--webhook-secret", metavar: "SECRET", help: "sign callbacks: X-Signature-256 = sha256=HMAC-SHA256 of the body (env or file keep it out of ps)") { c, v throws(ParseError) in
            guard !v.isEmpty else { throw ParseError(message: "--webhook-secret must not be empty") }
            c.webhookSecret = v
        },
        Option(flag: "--webhook-secret-file", metavar: "PATH", help: "read the webhook secret from this file (one trailing newline dropped)") { c, v throws(ParseError) in
            guard !v.isEmpty else { throw ParseError(message: "--webhook-secret-file needs a path") }
            c.webhookSecretFile = v
        },
    ]
}

extension ServiceConfiguration {
    /// The webhook signing key: `--webhook-secret`, or the contents of `--webhook-secret-file`
    /// (read at start; the file wins when both are set). nil: callbacks are not signed. Never logged.
    func webhookSecretBytes() throws(CommandLineOptions.ParseError) -> [UInt8]? {
        if let path = webhookSecretFile {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw CommandLineOptions.ParseError(message: "--webhook-secret-file: cannot read \(path)")
            }
            var bytes = [UInt8](data)
            if bytes.last == 10 { bytes.removeLast() }
            if bytes.last == 13 { bytes.removeLast() }
            guard !bytes.isEmpty else { throw CommandLineOptions.ParseError(message: "--webhook-secret-file: \(path) is empty") }
            return bytes
        }
        return webhookSecret.map { Array($0.utf8) }
    }
}

/// Start-up stopped before anything ran (the message says why; never a secret).
struct ServiceStartError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
