import Basics
import Foundation

/// When a delivery's tries happen. Pure (randomness comes in as `unit`), so a table test covers it.
///
/// The first try goes out at once; after failed try `n` (1-based) the next waits `base · 2^(n-1)`
/// seconds ±50 % jitter, unless the receiver's `Retry-After` (at most an hour) says how long. After
/// `maxTries` the delivery gives up: 1 + 2 + … + 1024 s ≈ 34 min of backoff, 17 to 51 min with jitter.
struct WebhookSchedule: Sendable, Equatable {
    var maxTries = 12
    var base: Double = 1
    /// The longest `Retry-After` honoured; a longer one is ignored (the computed delay is used).
    var maxRetryAfter: Double = 3600
    /// One try's bound: connect, send, and the whole answer.
    var tryTimeout: Double = 10

    /// Seconds to wait after failed try `tries` (1-based) before the next; nil: give up.
    /// `unit` is uniform in `0..<1`.
    func delay(afterTry tries: Int, retryAfter: Double?, unit: Double) -> Double? {
        guard tries < maxTries else { return nil }
        if let retryAfter, retryAfter >= 0, retryAfter <= maxRetryAfter { return retryAfter }
        let exponent = min(max(tries - 1, 0), 40)
        return base * pow(2, Double(exponent)) * (0.5 + min(max(unit, 0), 1))
    }

    /// The longest wait `delay` ever asks for: a stored delivery's next try is never further off
    /// than this (a time stored while the wall clock ran ahead would otherwise be waited for).
    var longestDelay: Double {
        max(maxRetryAfter, delay(afterTry: maxTries - 1, retryAfter: nil, unit: 1) ?? 0)
    }

    /// `Retry-After` as seconds from `now`: delay-seconds or an HTTP-date; nil when absent or unreadable.
    static func retryAfterSeconds(_ value: String?, now: Date) -> Double? {
        guard let text = value?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { return nil }
        if text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) { return text.count > 9 ? .infinity : Double(text) }
        guard let date = HTTPDate.parse(text) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }
}
