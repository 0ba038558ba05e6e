import Foundation

/// One caller's callback on one download, as stored. Tied to the caller's token (by its hash):
/// cancelling the token drops it.
struct WebhookRegistration: Sendable, Equatable {
    var id: String
    var downloadID: String
    var tokenHash: TokenHash
    var url: String
    var events: Set<WebhookEvent>
    var createdAt: Date
}

/// One delivery: a registration told about one event. Its id (`deliveryId`, `X-Delivery-Id`) and
/// body stay the same on every try. Kept once ended (`outcome` set) so the same event never makes
/// a second delivery for the registration, until the registration goes.
struct WebhookDelivery: Sendable, Equatable {
    var id: String
    var registrationID: String
    var event: WebhookEvent
    var body: [UInt8]
    /// Tries made so far.
    var tries: Int
    /// Wall-clock time of the next try (pending deliveries only; survives restarts).
    var nextAt: Date
    var outcome: WebhookOutcome?
    var reason: String?

    var key: DeliveryKey { DeliveryKey(registrationID: registrationID, event: event) }

    /// The id of the one delivery of `event` to registration `registrationID`: derived from them
    /// (registration ids are random), so a delivery made again (its first store failed and the
    /// process died, or another replica made it too) carries the same `X-Delivery-Id` and a
    /// receiver deduplicating on it sees one event once.
    static func id(registrationID: String, event: WebhookEvent) -> String {
        "dlv_" + SHA256Hasher.hex(Array("\(registrationID)/\(event.rawValue)".utf8)).prefix(32)
    }
}

/// At most one delivery per registration and event.
struct DeliveryKey: Hashable, Sendable {
    var registrationID: String
    var event: WebhookEvent
}
