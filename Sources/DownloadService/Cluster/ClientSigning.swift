import DownloaderEngine
import Foundation
import MiniHTTPServer

/// Cluster mode: the client address a forwarded request counts under on the holder
/// (`--max-downloads-per-client`). The forwarding replica sends the address its client connected
/// from in `field`, signed with the secret the replicas share through the database
/// (`ClientSignature`); the holder takes it only when the signature verifies, and otherwise counts
/// the connection's own address, as for any request. A client cannot forge it: it never learns
/// the secret, the field is not among those a replica passes on (`ForwardedHeaders.passed`), and a
/// value seen once is good for a minute only.
struct ClientSigning: Sendable {
    static let field = "X-Download-Service-Client"
    /// Name of the shared secret in the database (`cluster_secrets`).
    static let secretName = "forwarded-client"
    let secret: [UInt8]
    /// Unix seconds now (injected in tests).
    var now: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }

    init(secret: [UInt8]) {
        self.secret = secret
    }

    /// The field's value for a request this replica forwards.
    func value(for request: Request) -> String {
        ClientSignature.value(client: request.remoteIP, secret: secret, now: now())
    }

    /// The address `request` counts under: the one a replica vouched for (within the last minute),
    /// else the connection's.
    func client(of request: Request) -> String {
        guard let value = request.headers[Self.field],
              let client = ClientSignature.client(from: value, secret: secret, now: now()) else {
            return request.remoteIP
        }
        return client
    }

    /// 32 random bytes, for the first replica to start.
    static func freshSecret() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }
}
