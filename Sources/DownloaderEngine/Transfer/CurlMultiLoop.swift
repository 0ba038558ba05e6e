import Basics
import CCurl
import Dispatch
import Foundation
import Synchronization

/// One thread running one libcurl multi handle: every attempt of a `CurlTransferDriver` runs here.
///
/// Other threads never touch libcurl: they put starts and cancels in `inbox` (one lock) and wake the
/// thread with `curl_multi_wakeup`. The thread loops: take the inbox, add/remove handles, run
/// `curl_multi_perform`, finish completed attempts, check stalls, then `curl_multi_poll`.
final class CurlMultiLoop: @unchecked Sendable {
    private struct Inbox {
        var starts: [CurlTransfer] = []
        var cancels: [CurlTransfer] = []
        /// Lookups done for hops that go through the proxy (`HopRoute.lookup`).
        var lookups: [(transfer: CurlTransfer, addresses: [IPAddress], host: String, port: Int)] = []
        var stopping = false
        /// Set by the loop thread as it leaves; the multi handle is gone afterwards.
        var stopped = false
    }

    /// libcurl's process-wide initialisation, run once on first use (a Swift static is initialised
    /// exactly once, thread-safely).
    private static let globalInit: CURLcode = curl_global_init(ccurl_global_all())

    /// Marks the loop thread in its thread dictionary.
    fileprivate static let loopMarker = "DownloaderEngine.CurlMultiLoop"

    /// A turn of the loop (perform and completions) longer than this was held up by a callback.
    static let heldTurn: UInt64 = 500_000_000
    let multi: UnsafeMutableRawPointer?
    private let inbox = Mutex(Inbox())
    private let exited = DispatchSemaphore(value: 0)
    /// Attempts begun and not finished: an easy handle in the multi, or a lookup under way (loop thread only).
    var active: [ObjectIdentifier: CurlTransfer] = [:]

    /// Starts the thread. If libcurl cannot initialise, every attempt fails with `.connection`.
    init(threadName: String = "curl-transfers") {
        multi = Self.globalInit == CURLE_OK ? curl_multi_init() : nil
        // One transfer per connection: HTTP/2 streams to one origin are not multiplexed. A
        // segmented fetch's pieces exist to get more than one connection's share from an origin
        // that caps each connection (or a long link that limits each); multiplexed on one HTTP/2
        // connection they shared that share. Each transfer is alone on its connection, as over
        // HTTP/1.1; a connection left idle is still reused by the next transfer.
        if let multi { _ = ccurl_multi_setopt_long(multi, CURLMOPT_PIPELINING, CURLPIPE_NOTHING) }
        let thread = Thread { [self] in run() }
        thread.name = threadName
        thread.start()
    }

    /// Queues `transfer` for the loop thread.
    func submit(_ transfer: CurlTransfer) {
        let accepted = inbox.withLock { inbox -> Bool in
            guard !inbox.stopping else { return false }
            inbox.starts.append(transfer)
            if let multi { curl_multi_wakeup(multi) }
            return true
        }
        if !accepted {
            // No transfer thread any more: report from elsewhere, never on the caller's stack.
            DispatchQueue.global().async {
                transfer.delegate.transfer(didFinishWith: .failure(TransferFailure(.cancelled, "the transfer driver shut down")))
            }
        }
    }

    /// Hands a finished lookup to the loop thread (from the resolver's thread).
    func lookedUp(_ transfer: CurlTransfer, addresses: [IPAddress], host: String, port: Int) {
        inbox.withLock { inbox in
            guard !inbox.stopped else { return }
            inbox.lookups.append((transfer, addresses, host, port))
            if let multi { curl_multi_wakeup(multi) }
        }
    }

    /// Queues the removal of a cancelled attempt.
    func cancel(_ transfer: CurlTransfer) {
        inbox.withLock { inbox in
            guard !inbox.stopped else { return }
            inbox.cancels.append(transfer)
            if let multi { curl_multi_wakeup(multi) }
        }
    }

    /// Stops the thread; running attempts finish with `.cancelled`. With `wait`, returns once the
    /// thread is gone (bounded by 10 s).
    func shutdown(wait: Bool) {
        let first = inbox.withLock { inbox -> Bool in
            guard !inbox.stopping else { return false }
            inbox.stopping = true
            if let multi, !inbox.stopped { curl_multi_wakeup(multi) }
            return true
        }
        if first && wait && !Thread.current.isTransferLoop {  // Never wait for itself.
            _ = exited.wait(timeout: .now() + 10)
            exited.signal()  // Let a later waiter through too.
        }
    }

    // MARK: The loop thread

    private func run() {
        Thread.current.threadDictionary[Self.loopMarker] = true
        IDNLocale.adoptOnThisThread()
        defer { exited.signal() }
        guard let multi else {
            failEverythingAndStop(TransferFailure(.connection, "libcurl could not be initialised"))
            return
        }
        var running: Int32 = 0
        while true {
            let (starts, cancels, lookups, stopping) = inbox.withLock { inbox in
                defer { inbox.starts.removeAll(); inbox.cancels.removeAll(); inbox.lookups.removeAll() }
                return (inbox.starts, inbox.cancels, inbox.lookups, inbox.stopping)
            }
            for transfer in starts { begin(transfer, in: multi) }
            for lookup in lookups where !lookup.transfer.finished {
                routeLookedUp(lookup.transfer, lookup.addresses, host: lookup.host, port: lookup.port, in: multi)
            }
            for transfer in cancels where !transfer.finished {
                finish(transfer, .failure(TransferFailure(.cancelled, "cancelled")), in: multi)
            }
            if stopping { break }
            let performed = monotonicNanoseconds()
            _ = curl_multi_perform(multi, &running)
            collectCompletions(multi)
            let now = monotonicNanoseconds()
            // A turn this long was held up in a callback (a write the disk kept waiting): no origin's doing.
            let held = now - performed > Self.heldTurn ? now - performed : 0
            let timeout = checkStalls(now: now, held: held, in: multi)
            _ = curl_multi_poll(multi, nil, 0, timeout, nil)
        }
        for transfer in Array(active.values) {
            finish(transfer, .failure(TransferFailure(.cancelled, "the transfer driver shut down")), in: multi)
        }
        failEverythingAndStop(TransferFailure(.cancelled, "the transfer driver shut down"))
        curl_multi_cleanup(multi)
    }

    /// Marks the inbox stopped and fails whatever is still queued in it.
    private func failEverythingAndStop(_ failure: TransferFailure) {
        let leftovers = inbox.withLock { inbox in
            inbox.stopping = true
            inbox.stopped = true
            defer { inbox.starts.removeAll(); inbox.cancels.removeAll() }
            return inbox.starts
        }
        for transfer in leftovers where !transfer.finished {
            transfer.finished = true
            transfer.delegate.transfer(didFinishWith: .failure(failure))
        }
    }

    private func begin(_ transfer: CurlTransfer, in multi: UnsafeMutableRawPointer) {
        if transfer.isCancelled {
            finish(transfer, .failure(TransferFailure(.cancelled, "cancelled")), in: multi)
            return
        }
        transfer.context = Unmanaged.passRetained(transfer)  // Released in `finish`.
        active[ObjectIdentifier(transfer)] = transfer
        let request = transfer.request
        transfer.deadlines = AttemptDeadlines(connectTimeout: request.connectTimeout, headTimeout: request.headTimeout,
                                              stallTimeout: request.stallTimeout, minSpeed: request.minSpeed,
                                              startedAt: monotonicNanoseconds())
        startHop(transfer, in: multi)
    }

    private func collectCompletions(_ multi: UnsafeMutableRawPointer) {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            var pointer: UnsafeMutableRawPointer?
            guard ccurl_getinfo_pointer(easy, CURLINFO_PRIVATE, &pointer) == CURLE_OK, let pointer else { continue }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(pointer).takeUnretainedValue()
            let code = message.pointee.data.result
            if let next = transfer.pendingRedirect, transfer.abortReason == nil, !transfer.isCancelled {
                transfer.pendingRedirect = nil
                releaseEasy(transfer, in: multi)
                if !transfer.request.credentials.isEmpty, let list = transfer.headerList {
                    curl_slist_free_all(list)  // Built again for the next hop: its origin decides on the credentials.
                    transfer.headerList = nil
                }
                transfer.hopURL = next
                startHop(transfer, in: multi)
                continue
            }
            if let next = transfer.tunnelFallback(after: code) {
                releaseEasy(transfer, in: multi)
                route(transfer, .tunnel(next), in: multi)
                continue
            }
            finish(transfer, transfer.outcome(for: code), in: multi)
        }
    }

    /// Fails attempts whose connect, head or stall timer ran out (`AttemptDeadlines`), and gives each
    /// sink its look at held-back bytes (`BodySink.idle`); returns the poll timeout in ms.
    private func checkStalls(now: UInt64, held: UInt64, in multi: UnsafeMutableRawPointer) -> Int32 {
        var timeout: UInt64 = 1_000_000_000
        for transfer in Array(active.values) {
            if let due = transfer.sinkIdle() { timeout = min(timeout, UInt64(due * 1e9)) }
            guard var deadlines = transfer.deadlines else { continue }
            if held > 0 {
                deadlines.held(for: held, until: now)
                transfer.deadlines = deadlines
            }
            if transfer.sawActivity {
                transfer.sawActivity = false
                deadlines.activity(at: now, received: transfer.bodyBytes, connections: transfer.request.speedShare?.connections ?? 1)
                transfer.deadlines = deadlines
            }
            switch deadlines.check(now: now) {
            case .runningUntil(let deadline):
                timeout = min(timeout, deadline - now)
            case .expired(let kind, _):
                finish(transfer, .failure(transfer.timedOut(kind)), in: multi)
            case .tooSlow(let rate):
                finish(transfer, .failure(transfer.tooSlow(rate)), in: multi)
            case .drained:
                finish(transfer, transfer.outcome(for: CURLE_OK), in: multi)
            }
        }
        return Int32(timeout / 1_000_000) + 1
    }

    /// Ends an attempt exactly once: removes and frees its handle, drops the retain, reports.
    func finish(_ transfer: CurlTransfer, _ result: Result<TransferSummary, TransferFailure>,
                        in multi: UnsafeMutableRawPointer) {
        guard !transfer.finished else { return }
        transfer.finished = true
        releaseEasy(transfer, in: multi)
        active.removeValue(forKey: ObjectIdentifier(transfer))
        if let list = transfer.headerList {
            curl_slist_free_all(list)
            transfer.headerList = nil
        }
        transfer.stopWatchingTLS()
        transfer.context?.release()
        transfer.context = nil
        transfer.dropSink()
        transfer.delegate.transfer(didFinishWith: result)
    }
}

private extension Thread {
    /// True on a `CurlMultiLoop` thread (where waiting for the loop to exit would wait for itself).
    var isTransferLoop: Bool { threadDictionary[CurlMultiLoop.loopMarker] as? Bool == true }
}
