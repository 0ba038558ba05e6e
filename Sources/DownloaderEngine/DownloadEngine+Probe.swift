import Foundation
import Synchronization

/// The origin's answer to one `HEAD` (`DownloadEngine.probe`).
public struct OriginHead: Sendable, Equatable {
    public var status: Int
    public var contentLength: Int64?
    public var contentType: String?
    /// The name a download of it would take (`FileNameSanitizer`).
    public var fileName: String = FileNameSanitizer.fallback
    /// The origin's strong `ETag`, which a download of this version would be served under (nil:
    /// none, or a weak one; a download then gets a tag of its own).
    public var etag: String?
}

/// What a probe found: the origin's 2xx head, or the failure a download would report.
public enum ProbeOutcome: Sendable, Equatable {
    case head(OriginHead)
    case failed(DownloadFailure)
}

extension DownloadEngine {
    /// One `HEAD` to the origin of `request.url`, under the same SSRF guard and egress rules as a
    /// download (checked at connect time, every redirect hop followed as a download would). Starts
    /// no download. A 2xx gives its head; anything else is the failure a download would report, as
    /// is a `Content-Length` other than the request's `size` (`size_mismatch`).
    /// At most `maxConcurrentProbes` run at once (beyond: `EngineError.busy`); cancelling the
    /// calling task (its client left) ends the probe's connection.
    public func probe(_ request: DownloadRequest) async throws(EngineError) -> ProbeOutcome {
        let (url, headers) = try screenedWithHeaders(request)
        let c = configuration
        guard probesRunning.add(1, ordering: .relaxed).newValue <= c.maxConcurrentProbes else {
            probesRunning.subtract(1, ordering: .relaxed)
            throw .busy("\(c.maxConcurrentProbes) HEAD probes to origins are running; try again shortly")
        }
        defer { probesRunning.subtract(1, ordering: .relaxed) }
        let transfer = TransferRequest(url: url, headers: [], connectTimeout: c.connectTimeout, headTimeout: c.headTimeout,
                                       stallTimeout: c.stallTimeout,
                                       maxBodyBytes: nil, maxRedirects: c.maxRedirects,
                                       allowPrivateNetworks: c.allowPrivateNetworks, userAgent: c.userAgent, method: .head,
                                       credentials: headers.fields)
        let driver = core.driver
        let attempt = ProbeAttempt()
        let outcome = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                attempt.started(driver.start(transfer, delegate: HeadProbe(continuation, url: url)))
            }
        } onCancel: {
            attempt.cancel()
        }
        if case .head(let head) = outcome, let expected = request.size, let announced = head.contentLength, announced != expected {
            return .failed(DownloadFailure(code: .sizeMismatch, message: "the origin announces \(announced) bytes, expected \(expected)"))
        }
        return outcome
    }

    /// What a join of `request` would refuse before anything else, checked without joining (a
    /// `HEAD` answers as its `GET` would): a `sha256` that is not 64 hex digits (`invalidChecksum`),
    /// or a `sha256`/`size` contradicting the download of its URL (`conflict`, naming it).
    public func screenExpectations(_ request: DownloadRequest) throws(EngineError) {
        let sha = try EngineCore.normalizedSHA256(request.sha256)
        guard sha != nil || request.size != nil, let (url, headers) = try? screenedWithHeaders(request) else { return }
        let conflict = core.locked { () -> EngineError? in
            joined(url: url, headers: headers, sha: sha).flatMap { core.expectationConflict($0, sha: sha, size: request.size) }
        }
        if let conflict { throw conflict }
    }

    /// The bytes of the download `request` would join, as a reader would see them, without joining
    /// it (nil: no download of that URL, with those credentials, nor a stored file of its `sha256`).
    public func peek(_ request: DownloadRequest) -> (id: String, state: TailState)? {
        guard let (url, headers) = try? screenedWithHeaders(request) else { return nil }
        let sha = (try? EngineCore.normalizedSHA256(request.sha256)) ?? nil
        return core.locked {
            joined(url: url, headers: headers, sha: sha).map { ($0.id, $0.tailState(partialPath: core.partialPath(of: $0))) }
        }
    }

    /// Under the core's lock: the download a join of `url` would find, as `join` finds it: the
    /// URL's own stored file answers unless it is of another digest than asked; then a stored file
    /// of that digest does.
    private func joined(url: String, headers: CallerHeaders, sha: String?) -> DownloadRecord? {
        let key = core.coalescingKey(url: url, headers: headers)
        let own = core.byURL[key]
        let ownAnswers = own?.state == .completed && (sha == nil || own?.sha256 == sha)
        return (ownAnswers ? nil : sha.flatMap { core.reusable(sha256: $0, credential: key.credential) }) ?? own
    }

    /// `request`'s URL as a join screens it, its `user:password@` split out into the caller
    /// headers that key and authorise it (`screened`): a `HEAD` finds the download its `GET`
    /// would join, and asks the origin as it would.
    private func screenedWithHeaders(_ request: DownloadRequest) throws(EngineError) -> (url: String, headers: CallerHeaders) {
        let screened = try screened(request)
        return (screened.url, try CallerHeaders.validate(screened.headers).get())
    }

    /// Whether the download's file changed at the origin (its body started again from 0 with other
    /// content) within the last `seconds` by the engine's ageing clock (`AgeingClock`: a wall clock
    /// stepped forward does not close the window early; the change is kept in the state store, so
    /// a restart does not forget it). A change stamped ahead of now (the clock stepped back since)
    /// counts as within.
    public func changed(id: String, within seconds: Double) -> Bool {
        guard let changedAt = core.locked({ core.byID[id]?.changedAt }) else { return false }
        return core.ageing.now(core.clock).timeIntervalSince(changedAt) < seconds
    }
}

/// A probe's attempt, cancelled when its task is (before or after it started).
private final class ProbeAttempt: Sendable {
    private let state = Mutex<(handle: (any TransferHandle)?, cancelled: Bool)>((nil, false))

    func started(_ handle: any TransferHandle) {
        if state.withLock({ state in state.handle = handle; return state.cancelled }) { handle.cancel() }
    }

    func cancel() {
        state.withLock { state in state.cancelled = true; return state.handle }?.cancel()
    }
}

/// Receives a probe's head and ends it.
private final class HeadProbe: TransferDelegate, @unchecked Sendable {
    private let continuation: Mutex<CheckedContinuation<ProbeOutcome, Never>?>
    private let head = Mutex<ResponseHead?>(nil)
    /// The URL asked (a download of it takes its file name from it first).
    private let url: String

    init(_ continuation: CheckedContinuation<ProbeOutcome, Never>, url: String) {
        self.continuation = Mutex(continuation)
        self.url = url
    }

    func transfer(didReceive head: ResponseHead) -> Result<BodySink, TransferFailure> {
        self.head.withLock { $0 = head }
        return .failure(TransferFailure(.rejected, "head only"))
    }

    func transfer(didFinishWith result: Result<TransferSummary, TransferFailure>) {
        guard let resume = continuation.withLock({ c in defer { c = nil }; return c }) else { return }
        if let head = head.withLock({ $0 }) {
            guard (200..<300).contains(head.status) else {
                resume.resume(returning: .failed(DownloadFailure(code: .httpError, message: "the origin answered HTTP \(head.status)",
                                                                  httpStatus: head.status)))
                return
            }
            resume.resume(returning: .head(OriginHead(status: head.status, contentLength: head.contentLength,
                                                         contentType: head.value("content-type"), fileName: FileNameSanitizer.fileName(of: head, url: url),
                                                         etag: ResumePlan.validator(of: head)?.etag)))
            return
        }
        let failure: TransferFailure
        switch result {
        case .failure(let f): failure = f
        case .success: failure = TransferFailure(.connection, "no response head")
        }
        let reported = AttemptVerdict.downloadFailure(after: failure, requestedOffset: 0, acceptedOffset: nil, diskError: nil)
            ?? DownloadFailure(code: .retriesExhausted, message: "gave up after 1 attempt (HEAD): \(failure.message)")
        resume.resume(returning: .failed(reported))
    }
}
