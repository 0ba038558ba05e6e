import Foundation
import Testing
@testable import DownloaderEngine

@Suite struct RetryPolicyTests {
    let policy = RetryPolicy(baseDelay: 0.5, maxDelay: 30, maxAttempts: 6)
    let now = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT

    @Test(arguments: [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (7, 30.0), (60, 30.0)])
    func fullJitterBounds(_ attempt: Int, _ ceiling: Double) {
        #expect(policy.delay(attemptsMade: attempt, retryAfter: nil, now: now, unit: 0) == 0)
        #expect(policy.delay(attemptsMade: attempt, retryAfter: nil, now: now, unit: 0.5) == ceiling / 2)
        let top = policy.delay(attemptsMade: attempt, retryAfter: nil, now: now, unit: 0.999_999)
        #expect(top <= ceiling && top > ceiling * 0.99)
    }

    @Test(arguments: [
        ("3", 3.0), ("0", 0.0), ("120", 30.0), (" 5 ", 5.0),
        ("Sun, 06 Nov 1994 08:49:47 GMT", 10.0), ("Sunday, 06-Nov-94 08:49:42 GMT", 5.0),
        ("Sun Nov  6 08:49:40 1994", 3.0), ("Sun, 06 Nov 1994 08:40:00 GMT", 0.0),
        ("Sun, 06 Nov 1994 09:49:37 GMT", 30.0),
    ])
    func retryAfterHonouredAndCapped(_ value: String, _ expected: Double) {
        #expect(policy.delay(attemptsMade: 1, retryAfter: value, now: now, unit: 0.9) == expected)
    }

    @Test func unparsableRetryAfterFallsBackToBackoff() {
        #expect(policy.delay(attemptsMade: 3, retryAfter: "soon", now: now, unit: 0.5) == 1.0)
        #expect(RetryPolicy.retryAfterSeconds("-1", now: now) == nil)
    }

    @Test func attemptsLimit() {
        #expect(policy.allowsRetry(attemptsMade: 5))
        #expect(!policy.allowsRetry(attemptsMade: 6))
    }

    @Test(arguments: [
        (TransferFailure.Kind.connection, RetryPolicy.Verdict.retry), (.connectTimeout, .retry), (.stalled, .retry),
        (.tooLarge, .fail(code: .tooLarge)), (.blockedAddress, .fail(code: .destinationForbidden)), (.headerTooLarge, .fail(code: .headerTooLarge)), (.badResponse, .fail(code: .badResponse)),
        (.tooManyRedirects, .fail(code: .tooManyRedirects)),
        (.unsupportedRedirect, .fail(code: .unsupportedRedirect)),
        (.headTimeout, .retry), (.tlsCertificate, .fail(code: .tlsCertificate)), (.tlsHandshake, .fail(code: .tlsHandshake)),
        (.contentLengthMismatch, .fail(code: .contentLengthMismatch)), (.proxyAuth, .fail(code: .proxyAuth)),
        (.proxyRefused, .fail(code: .proxyRefused)),
    ] as [(TransferFailure.Kind, RetryPolicy.Verdict)])
    func classification(_ kind: TransferFailure.Kind, _ verdict: RetryPolicy.Verdict) {
        #expect(RetryPolicy.classify(kind) == verdict)
    }

    @Test func theTimeoutsNameTheExhaustion() {
        #expect(RetryPolicy.exhaustionCode(.connectTimeout) == .connectTimeout)
        #expect(RetryPolicy.exhaustionCode(.headTimeout) == .headTimeout)
        for kind in [TransferFailure.Kind.connection, .stalled] { #expect(RetryPolicy.exhaustionCode(kind) == .retriesExhausted) }
    }
}
