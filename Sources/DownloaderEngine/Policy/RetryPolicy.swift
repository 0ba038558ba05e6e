import Basics
import Foundation

/// When and whether to try again. Pure: exponential backoff with full jitter, `Retry-After`
/// (delta-seconds or HTTP-date) honoured, every delay capped at `maxDelay`.
struct RetryPolicy: Sendable, Equatable {
    var baseDelay: Double
    var maxDelay: Double
    var maxAttempts: Int

    init(baseDelay: Double, maxDelay: Double, maxAttempts: Int) {
        self.baseDelay = max(0, baseDelay)
        self.maxDelay = max(0, maxDelay)
        self.maxAttempts = max(1, maxAttempts)
    }

    init(_ configuration: EngineConfiguration) {
        self.init(baseDelay: configuration.retryBaseDelay, maxDelay: configuration.retryMaxDelay,
                  maxAttempts: configuration.maxAttempts)
    }

    /// True when another attempt is allowed after `attemptsMade` attempts.
    func allowsRetry(attemptsMade: Int) -> Bool { attemptsMade < maxAttempts }

    /// Delay before the attempt that follows attempt number `attemptsMade` (1-based).
    /// `unit` is a uniform random value in 0..<1. A parsable `retryAfter` replaces the backoff.
    func delay(attemptsMade: Int, retryAfter: String?, now: Date, unit: Double) -> Double {
        if let text = retryAfter, let seconds = Self.retryAfterSeconds(text, now: now) {
            return min(maxDelay, seconds)
        }
        let exponent = Double(max(0, attemptsMade - 1))
        let ceiling = min(maxDelay, baseDelay * pow(2, min(exponent, 62)))
        return min(ceiling, max(0, unit) * ceiling)
    }

    /// Seconds from a `Retry-After` value: delta-seconds or an HTTP-date (never negative).
    static func retryAfterSeconds(_ text: String, now: Date) -> Double? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let seconds = Int64(trimmed) { return seconds >= 0 ? Double(seconds) : nil }
        guard let date = HTTPDate.parse(trimmed) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }

    /// How a failed attempt is treated.
    enum Verdict: Equatable {
        case retry
        /// Fail now with this public code.
        case fail(code: DownloadFailure.Code)
    }

    /// The download's code when a retried failure of `kind` was the last attempt allowed: the
    /// timeouts name themselves, everything else is `retries_exhausted`.
    static func exhaustionCode(_ kind: TransferFailure.Kind) -> DownloadFailure.Code {
        switch kind {
        case .connectTimeout: .connectTimeout
        case .headTimeout: .headTimeout
        default: .retriesExhausted
        }
    }

    static func classify(_ kind: TransferFailure.Kind) -> Verdict {
        switch kind {
        case .connection, .connectTimeout, .headTimeout, .stalled: return .retry
        case .tlsCertificate: return .fail(code: .tlsCertificate)
        case .tlsHandshake: return .fail(code: .tlsHandshake)
        case .contentLengthMismatch: return .fail(code: .contentLengthMismatch)
        case .proxyAuth: return .fail(code: .proxyAuth)
        case .proxyRefused: return .fail(code: .proxyRefused)
        case .tooLarge: return .fail(code: .tooLarge)
        case .blockedAddress: return .fail(code: .destinationForbidden)
        case .headerTooLarge: return .fail(code: .headerTooLarge)
        case .badResponse: return .fail(code: .badResponse)
        case .tooManyRedirects: return .fail(code: .tooManyRedirects)
        case .unsupportedRedirect: return .fail(code: .unsupportedRedirect)
        case .disk: return .fail(code: .diskError)
        case .rejected: return .fail(code: .httpError)
        case .cancelled: return .fail(code: .cancelled)
        }
    }
}
