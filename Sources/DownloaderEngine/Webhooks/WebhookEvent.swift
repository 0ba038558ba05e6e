import Foundation

/// A download event a caller can be called back about.
public enum WebhookEvent: String, Sendable, CaseIterable, Comparable {
    case completed
    case failed

    public static func < (a: WebhookEvent, b: WebhookEvent) -> Bool { a.rawValue < b.rawValue }
}

/// A caller's callback: POST to `url` when one of `events` happens to the download.
public struct CallbackRequest: Sendable, Equatable {
    /// Absolute `http` or `https` URL (checked by the SSRF guard's rules like a download's).
    public var url: String
    public var events: Set<WebhookEvent>

    public init(url: String, events: Set<WebhookEvent> = Set(WebhookEvent.allCases)) {
        self.url = url
        self.events = events
    }

    /// The URL as shown in snapshots and logs: scheme and host (and a port that is not the
    /// default) only, since callback URLs often carry tokens in their path or query.
    public static func shown(_ url: String) -> String {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
              let host = components.percentEncodedHost, !host.isEmpty else { return "(invalid URL)" }
        let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return "\(scheme)://\(bracketed)" + (components.port.map { ":\($0)" } ?? "")
    }
}

/// How a delivery ended.
public enum WebhookOutcome: String, Sendable, CaseIterable {
    /// The receiver answered 2xx.
    case delivered
    /// No 2xx within the schedule's tries.
    case gaveUp = "gave_up"
    /// The address connected to was refused by the SSRF guard: ended at once, never retried.
    case forbidden
}

/// One delivery's end, for the service's log and metrics. `shownURL` is scheme and host only.
public struct WebhookReport: Sendable, Equatable {
    public var deliveryID: String
    public var downloadID: String
    public var event: WebhookEvent
    public var shownURL: String
    public var outcome: WebhookOutcome
    public var tries: Int
    /// Why it ended this way (the last answer or error); nil when delivered.
    public var reason: String?
}

/// Counters for `/metrics`; they only grow.
public struct WebhookStatistics: Sendable, Equatable {
    public var deliveries: [WebhookOutcome: Int64] = [:]
    /// Every try (HTTP request attempted), whatever its result.
    public var tries: Int64 = 0
    /// Cluster mode: calls to the cluster database for webhooks that failed (each round's, each try's record).
    public var storeErrors: Int64 = 0

    public init() {}
}

/// What the service gives the dispatcher: the body of a delivery, the signing secret and the
/// `User-Agent`, and where each ended delivery is reported.
public struct WebhookSettings: Sendable {
    /// The exact body of a delivery (`{"event","deliveryId","download"}`), rendered once per
    /// delivery and stored, so every try sends the same bytes.
    public var render: @Sendable (_ event: WebhookEvent, _ deliveryID: String, _ snapshot: DownloadSnapshot) -> [UInt8]
    /// Key of `X-Signature-256` (HMAC-SHA256 of the body); nil: deliveries are not signed.
    public var secret: [UInt8]?
    public var userAgent: String
    /// Called once per delivery that ended, off every lock.
    public var report: @Sendable (WebhookReport) -> Void
    /// Called when the journal could not store or remove what a delivery or registration became
    /// (the state database failed): what it says may not hold after a restart.
    public var journalFailed: @Sendable (String) -> Void

    public init(render: @escaping @Sendable (WebhookEvent, String, DownloadSnapshot) -> [UInt8], secret: [UInt8]?,
                userAgent: String, report: @escaping @Sendable (WebhookReport) -> Void = { _ in },
                journalFailed: @escaping @Sendable (String) -> Void = { _ in }) {
        self.render = render
        self.secret = secret
        self.userAgent = userAgent
        self.report = report
        self.journalFailed = journalFailed
    }
}
