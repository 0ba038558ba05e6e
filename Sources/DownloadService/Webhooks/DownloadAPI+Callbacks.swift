import DownloaderEngine
import Foundation
import MiniHTTPServer

// `POST /downloads` with a `callback`: checked before anything is created, stored once the
// caller holds its token.
extension DownloadAPI {
    /// The body's `callback` (nil when none), or the error answer: `400 invalid_callback`, or
    /// `403 destination_forbidden` when the SSRF guard's rules refuse its host already.
    func callback(in body: Any) -> Result<CallbackRequest?, APIError> {
        switch CallbackBody.parse(object: body) {
        case .failure(let error): return .failure(error)
        case .success(nil): return .success(nil)
        case .success(let callback?):
            do throws(EngineError) {
                try engine.webhooks.screen(callback)
            } catch where error.code == .destinationForbidden {
                return .failure(APIError(engineError: error))
            } catch {
                return .failure(.badRequest(.invalidCallback, "\"callback.url\": \(error.message)"))
            }
            return .success(callback)
        }
    }

    /// Stores `callback` for the caller that `enqueued` answered; when that fails the caller's
    /// token is given back and the error is the answer. The store is durable (an fsync) and runs
    /// on a queue of its own, awaited: the event loop that answers every caller does not wait on it.
    /// (Cluster mode: this already runs on a database worker, and the database takes many at once.)
    func register(_ callback: CallbackRequest, for enqueued: Enqueued) async -> APIError? {
        let webhooks = engine.webhooks
        let store: @Sendable () -> Result<Void, WebhookJournalError> = {
            do throws(WebhookJournalError) {
                try webhooks.register(callback, token: enqueued.token, snapshot: enqueued.snapshot)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        let stored = cluster != nil ? store() : await withCheckedContinuation { continuation in
            Self.registrationQueue.async { continuation.resume(returning: store()) }
        }
        switch stored {
        case .success:
            return nil
        case .failure(let error):
            _ = engine.cancel(token: enqueued.token)
            callerQuota?.remove(enqueued.token)
            return APIError(status: 503, .callbackNotRecorded,
                            "the callback could not be recorded (\(error)); your request was withdrawn (no token, no callback): retry later",
                            headers: ["Retry-After": "5"])
        }
    }

    /// Where callbacks are stored in a single process, one at a time (SQLite takes one writer at once).
    static let registrationQueue = DispatchQueue(label: "download-service.callback-registrations")
}
