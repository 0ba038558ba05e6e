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
        if let path = webhookSecretFile { return try CommandLineOptions.secretBytes(path, "--webhook-secret-file") }
        return webhookSecret.map { Array($0.utf8) }
    }
}

/// Start-up stopped before anything ran (the message says why; never a secret).
struct ServiceStartError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
