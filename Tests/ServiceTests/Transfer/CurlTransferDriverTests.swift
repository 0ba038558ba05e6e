import Basics
import CLinux
@testable import DownloaderEngine
import Foundation
import Glibc
import Testing

/// The libcurl driver against the in-process `TestOrigin`.
@Suite struct CurlTransferDriverTests {
    /// One transfer on a fresh driver: its summary, and the recorder that saw it.
    static func fetchOnce(_ request: TransferRequest) async throws -> (TransferSummary, TransferRecorder) {
        let recorder = try await attempt(request)
        return (try await recorder.outcome().get(), recorder)
    }

    /// One attempt on a fresh driver (shut down afterwards), whatever its outcome: the recorder that
    /// saw it, once the outcome is in (bounded by `TransferRecorder.outcome`'s default timeout).
    static func attempt(_ request: TransferRequest, recorder: TransferRecorder = TransferRecorder()) async throws -> TransferRecorder {
        let driver = CurlTransferDriver()
        defer { driver.shutdown() }
        return try await attempt(request, on: driver, recorder: recorder)
    }

    /// One attempt on `driver` (kept running, for tests of several attempts on one driver): the
    /// recorder that saw it, once the outcome is in.
    static func attempt(_ request: TransferRequest, on driver: CurlTransferDriver,
                        recorder: TransferRecorder = TransferRecorder()) async throws -> TransferRecorder {
        _ = driver.start(request, delegate: recorder)
        _ = try await recorder.outcome()
        return recorder
    }

    @Test func fullBodyArrivesByteIdenticalWithValidators() async throws {
        let origin = try TestOrigin(bodySize: 3 * 1024 * 1024 + 17)
        defer { origin.stop() }
        let (summary, recorder) = try await Self.fetchOnce(.test(origin.url))

        #expect(summary.head.status == 200)
        #expect(summary.head.value("ETag") == origin.etag())
        #expect(summary.head.value("last-modified") == origin.lastModified())
        #expect(summary.head.effectiveURL == origin.url)
        #expect(summary.bodyBytes == Int64(origin.expectedBody().count))
        #expect(recorder.sink.bytes == origin.expectedBody())
        #expect(recorder.heads.count == 1)
        let sent = try #require(origin.requests().first)
        #expect(sent.header("user-agent") == "transfer-tests/1")
        #expect(sent.header("accept-encoding") == nil)
        #expect(sent.header("range") == nil)
    }

    @Test func rangeRequestGetsTheRest() async throws {
        let origin = try TestOrigin(bodySize: 1_000_000)
        defer { origin.stop() }
        let etag = try #require(origin.etag())
        let (summary, recorder) = try await Self.fetchOnce(.test(origin.url, headers: [("Range", "bytes=400000-"), ("If-Range", etag)]))

        #expect(summary.head.status == 206)
        #expect(summary.head.value("content-range") == "bytes 400000-999999/1000000")
        #expect(recorder.sink.bytes == Array(origin.expectedBody()[400_000...]))
        let sent = try #require(origin.requests().last)
        #expect(sent.header("range") == "bytes=400000-")
        #expect(sent.header("if-range") == etag)
    }

    @Test func redirectChainReportsOnlyTheFinalHop() async throws {
        let origin = try TestOrigin(bodySize: 50_000)
        defer { origin.stop() }
        origin.redirect(from: "/a", to: "/b")
        origin.redirect(from: "/b", to: "/file", status: 307)
        let (summary, recorder) = try await Self.fetchOnce(.test(origin.url("/a"), headers: [("Range", "bytes=10-")]))

        #expect(recorder.heads.count == 1)
        #expect(summary.head.status == 206)
        #expect(summary.head.headers["etag"] == [try #require(origin.etag())])
        #expect(summary.head.headers["last-modified"] == [try #require(origin.lastModified())])
        #expect(summary.head.headers["location"] == nil)
        #expect(summary.head.effectiveURL == origin.url)
        #expect(recorder.sink.bytes == Array(origin.expectedBody()[10...]))
        #expect(origin.requests().map(\.path) == ["/a", "/b", "/file"])
        #expect(origin.requests().allSatisfy { $0.header("range") == "bytes=10-" })
    }

    /// A redirect may name its host in Unicode: libcurl follows it to the punycode host (libidn2
    /// reads the name in the transfer thread's UTF-8 locale; in the C locale the hop failed as
    /// "bad/illegal format"). `*.localhost` is loopback to libcurl, without DNS.
    @Test func aRedirectToAnInternationalisedHostIsFollowed() async throws {
        let origin = try TestOrigin(bodySize: 20_000)
        defer { origin.stop() }
        origin.redirect(from: "/a", to: "http://bücher.localhost:\(origin.port)/file")
        let (summary, recorder) = try await Self.fetchOnce(.test(origin.url("/a")))

        #expect(summary.head.status == 200)
        #expect(recorder.sink.bytes == origin.expectedBody())
        #expect(origin.requests().map(\.path) == ["/a", "/file"])
        #expect(origin.requests().last?.header("host") == "xn--bcher-kva.localhost:\(origin.port)")
    }

    @Test func tooManyRedirects() async throws {
        let origin = try TestOrigin(bodySize: 10)
        defer { origin.stop() }
        origin.redirect(from: "/r1", to: "/r2")
        origin.redirect(from: "/r2", to: "/r3")
        origin.redirect(from: "/r3", to: "/file")
        let driver = CurlTransferDriver()
        defer { driver.shutdown() }

        let recorder = try await Self.attempt(.test(origin.url("/r1"), maxRedirects: 2), on: driver)
        #expect(try await recorder.failureKind() == .tooManyRedirects)
        #expect(recorder.heads.isEmpty)
        #expect(origin.getCount() == 0)

        let none = try await Self.attempt(.test(origin.url("/r3"), maxRedirects: 0), on: driver)
        #expect(try await none.failureKind() == .tooManyRedirects)
        #expect(none.heads.isEmpty)
    }

    @Test func errorHeadIsDeliveredAndRejectingItWritesNothing() async throws {
        let origin = try TestOrigin(bodySize: 10_000)
        defer { origin.stop() }
        let driver = CurlTransferDriver()
        defer { driver.shutdown() }

        let missing = try await Self.attempt(.test(origin.url("/missing")), on: driver)
        #expect(try await missing.failureKind() == .rejected)
        #expect(missing.heads.map(\.status) == [404])
        #expect(missing.sink.count == 0)

        origin.inject(.status(503, retryAfter: "3"))
        let busy = try await Self.attempt(.test(origin.url), on: driver)
        #expect(try await busy.failureKind() == .rejected)
        #expect(busy.heads.first?.status == 503)
        #expect(busy.heads.first?.value("retry-after") == "3")
        #expect(busy.sink.count == 0)

        // A non-2xx head the delegate accepts still never gets its body written.
        origin.inject(.status(500, retryAfter: nil))
        let accepting = try await Self.attempt(.test(origin.url), on: driver, recorder: TransferRecorder(decide: { _ in nil }))
        #expect(try await accepting.failureKind() == .rejected)
        #expect(accepting.sink.count == 0)
    }

    @Test func rejectingASuccessfulHeadWritesNothing() async throws {
        let origin = try TestOrigin(bodySize: 2_000_000)
        defer { origin.stop() }
        let recorder = try await Self.attempt(.test(origin.url),
                                              recorder: TransferRecorder(decide: { _ in TransferFailure(.rejected, "policy") }))

        #expect(try await recorder.outcome() == .failure(TransferFailure(.rejected, "policy")))
        #expect(recorder.sink.count == 0)
        #expect(recorder.finishCount == 1)
    }

    @Test func emptyBodyStillDeliversTheHead() async throws {
        let origin = try TestOrigin(bodySize: 0)
        defer { origin.stop() }
        let (summary, recorder) = try await Self.fetchOnce(.test(origin.url))

        #expect(summary.head.status == 200)
        #expect(summary.bodyBytes == 0)
        #expect(recorder.heads.count == 1)
    }

    @Test func cutConnectionFailsWithTheBytesSoFar() async throws {
        let origin = try TestOrigin(bodySize: 1_000_000)
        defer { origin.stop() }
        origin.inject(.cut(afterBodyBytes: 300_000))
        let recorder = try await Self.attempt(.test(origin.url))

        #expect(try await recorder.failureKind() == .connection)
        #expect(recorder.sink.bytes == Array(origin.expectedBody()[..<300_000]))
    }

    @Test func aResetAfterTheWholeAnnouncedBodyIsNoFailure() async throws {
        let origin = try TestOrigin(bodySize: 100_000)
        defer { origin.stop() }
        origin.inject(.reset(afterBodyBytes: 100_000))
        let (summary, recorder) = try await Self.fetchOnce(.test(origin.url))

        #expect(summary.bodyBytes == 100_000)
        #expect(recorder.sink.bytes == origin.expectedBody())
    }

    @Test func aResetBeforeTheAnnouncedEndIsAConnectionFailure() async throws {
        let origin = try TestOrigin(bodySize: 100_000)
        defer { origin.stop() }
        origin.inject(.reset(afterBodyBytes: 99_999))
        let recorder = try await Self.attempt(.test(origin.url))

        #expect(try await recorder.failureKind() == .connection)
    }

    @Test func closeDelimitedBodyCompletes() async throws {
        let origin = try TestOrigin(bodySize: 200_000, settings: .init(closeDelimited: true))
        defer { origin.stop() }
        let (summary, recorder) = try await Self.fetchOnce(.test(origin.url))

        #expect(summary.head.value("content-length") == nil)
        #expect(recorder.sink.bytes == origin.expectedBody())
    }

    @Test func stalledOriginFailsWithStalled() async throws {
        let origin = try TestOrigin(bodySize: 1_000_000)
        defer { origin.stop() }
        origin.inject(.stall(afterBodyBytes: 100_000))
        let recorder = try await Self.attempt(.test(origin.url, stallTimeout: 0.4))

        #expect(try await recorder.failureKind() == .stalled)
        #expect(recorder.sink.bytes == Array(origin.expectedBody()[..<100_000]))
    }

    @Test func maxBodyBytesFromContentLength() async throws {
        let origin = try TestOrigin(bodySize: 1_000_000)
        defer { origin.stop() }
        let recorder = try await Self.attempt(.test(origin.url, maxBodyBytes: 500_000))

        #expect(try await recorder.failureKind() == .tooLarge)
        #expect(recorder.sink.count == 0)
    }

    @Test func redirectToANonHTTPSchemeIsAFinalUnsupportedRedirect() async throws {
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        origin.redirect(from: "/to-ftp", to: "ftp://127.0.0.1:\(origin.port)/file")
        let recorder = try await Self.attempt(.test(origin.url("/to-ftp")))

        #expect(try await recorder.failureKind() == .unsupportedRedirect)
        #expect(recorder.heads.isEmpty)
        #expect(recorder.sink.count == 0)
        #expect(RetryPolicy.classify(.unsupportedRedirect) == .fail(code: .unsupportedRedirect))
    }

    @Test func anErrorHeadLargerThanMaxBodyBytesStillReachesTheDelegate() async throws {
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        let driver = CurlTransferDriver()
        defer { driver.shutdown() }

        // "not found\n" is 10 bytes: over the limit, but the limit is for accepted (2xx) bodies.
        let recorder = try await Self.attempt(.test(origin.url("/missing"), maxBodyBytes: 4), on: driver)
        #expect(try await recorder.failureKind() == .rejected)
        #expect(recorder.heads.map(\.status) == [404])
        #expect(recorder.sink.count == 0)

        // A 2xx over the limit is still refused before its head is accepted.
        let big = try await Self.attempt(.test(origin.url, maxBodyBytes: 999), on: driver)
        #expect(try await big.failureKind() == .tooLarge)
        #expect(big.sink.count == 0)
    }

    /// A 416 accepted because the bytes kept are the whole file (the engine does so): its page is
    /// dropped whatever the size limit left for a body (none: `limit - kept` is 0), and however it
    /// ends, cut before its own Content-Length included.
    @Test func anAccepted416PageIsDroppedWhateverItsLengthOrEnd() async throws {
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        let driver = CurlTransferDriver()
        defer { driver.shutdown() }
        let accepting416 = { TransferRecorder(decide: { $0.status == 416 ? nil : TransferFailure(.rejected, "not 416") }) }
        let request = TransferRequest.test(origin.url, headers: [("Range", "bytes=1000-")], maxBodyBytes: 0)
        let whole = try await Self.attempt(request, on: driver, recorder: accepting416())
        #expect(try await whole.failureKind() == nil)
        #expect(whole.heads.map(\.status) == [416] && whole.sink.count == 0)

        for (index, fault) in [TestOrigin.Fault.cut(afterBodyBytes: 5), .reset(afterBodyBytes: 5)].enumerated() {
            origin.inject(fault)
            let cut = try await Self.attempt(request, on: driver, recorder: accepting416())
            #expect(try await cut.failureKind() == nil, "\(fault)")
            #expect(cut.heads.map(\.status) == [416] && cut.sink.count == 0, "\(fault)")
            #expect(origin.cutCount == index + 1, "the page was cut short of its Content-Length: \(fault)")
        }
    }

    @Test func maxBodyBytesWithoutContentLength() async throws {
        let origin = try TestOrigin(bodySize: 1_000_000, settings: .init(closeDelimited: true))
        defer { origin.stop() }
        let recorder = try await Self.attempt(.test(origin.url, maxBodyBytes: 500_000))

        #expect(try await recorder.failureKind() == .tooLarge)
        #expect(recorder.sink.count <= 500_000)
        #expect(recorder.sink.bytes == Array(origin.expectedBody()[..<recorder.sink.count]))
    }

    /// `SystemError` is what the engine's sinks (the partial file, a segment's pwrite) throw.
    @Test(arguments: [POSIXError(.ENOSPC), SystemError(errno: ENOSPC, function: "pwrite")] as [any Error])
    func sinkFailureIsDiskWithErrno(_ error: any Error) async throws {
        let origin = try TestOrigin(bodySize: 100_000)
        defer { origin.stop() }
        let recorder = try await Self.attempt(.test(origin.url), recorder: TransferRecorder(sink: CollectingSink(failWith: error)))
        let result = try await recorder.outcome()

        guard case .failure(let failure) = result else { Issue.record("expected a failure"); return }
        #expect(failure.kind == .disk)
        #expect(failure.code == ENOSPC)
    }

    @Test func cancelMidTransferStopsWrites() async throws {
        // 30 s of body: the cancel comes long before the end even when a loaded machine runs
        // this task late (at 4 MB the transfer once finished before the cancel under load).
        let origin = try TestOrigin(bodySize: 12_000_000, settings: .init(bytesPerSecond: 400_000))
        defer { origin.stop() }
        let driver = CurlTransferDriver()
        defer { driver.shutdown() }
        let recorder = TransferRecorder(sink: CollectingSink(threshold: 40_000))

        let handle = driver.start(.test(origin.url), delegate: recorder)
        _ = try await withTimeout(10) { try await recorder.sink.reachedThreshold.value() }
        handle.cancel()
        handle.cancel()

        #expect(try await recorder.failureKind() == .cancelled)
        let kept = recorder.sink.count
        #expect(kept < 12_000_000)
        #expect(recorder.sink.bytes == Array(origin.expectedBody()[..<kept]))
        #expect(recorder.sink.writesAfterFinish == 0)
        handle.cancel()
        #expect(recorder.finishCount == 1)
    }

    @Test func cancelBeforeAnyByte() async throws {
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        // Only the cancel may end it: neither the origin nor the stall timer gives up first, however
        // long a loaded machine takes to run the test's task.
        origin.update { $0.stallBound = 60 }
        origin.inject(.stall(afterBodyBytes: 0))
        let driver = CurlTransferDriver()
        defer { driver.shutdown() }
        let recorder = TransferRecorder()

        let handle = driver.start(.test(origin.url, stallTimeout: 60), delegate: recorder)
        _ = try await withTimeout(20) { try await recorder.headArrived.value() }
        handle.cancel()

        #expect(try await recorder.failureKind(timeout: 30) == .cancelled)
        #expect(recorder.sink.count == 0)
    }

    @Test func loopbackIsRefusedWithoutAllowPrivateNetworks() async throws {
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        let driver = CurlTransferDriver()
        defer { driver.shutdown() }

        let recorder = try await Self.attempt(.test(origin.url, allowPrivateNetworks: false), on: driver)
        #expect(try await recorder.failureKind() == .blockedAddress)
        #expect(origin.connectionCount == 0)
        #expect(recorder.heads.isEmpty)

        let byName = try await Self.attempt(.test("http://localhost:\(origin.port)/file", allowPrivateNetworks: false), on: driver)
        #expect(try await byName.failureKind() == .blockedAddress)
        #expect(origin.connectionCount == 0)
    }

    @Test func aReusedConnectionIsCheckedToo() async throws {
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        let driver = CurlTransferDriver()
        defer { driver.shutdown() }
        _ = try await Self.attempt(.test(origin.url), on: driver).outcome().get()

        // The kept-alive connection to 127.0.0.1 is offered for reuse: no socket is opened, so only the
        // pre-request check can refuse it.
        let refused = try await Self.attempt(.test(origin.url, allowPrivateNetworks: false), on: driver)

        #expect(try await refused.failureKind() == .blockedAddress)
        #expect(origin.getCount() == 1)
        #expect(origin.connectionCount == 1)
    }

    @Test func staleIfRangeGetsTheWholeNewBody() async throws {
        let origin = try TestOrigin(bodySize: 100_000)
        defer { origin.stop() }
        let oldETag = try #require(origin.etag())
        origin.changeVersion()
        let (summary, recorder) = try await Self.fetchOnce(.test(origin.url, headers: [("Range", "bytes=500-"), ("If-Range", oldETag)]))

        #expect(summary.head.status == 200)
        #expect(summary.head.value("etag") == origin.etag())
        #expect(recorder.sink.bytes == origin.expectedBody())
    }

    @Test func headerInjectionIsRefused() async throws {
        let origin = try TestOrigin(bodySize: 10)
        defer { origin.stop() }
        let recorder = try await Self.attempt(.test(origin.url, headers: [("If-Range", "\"a\"\r\nX-Evil: 1")]))

        #expect(try await recorder.failureKind() == .rejected)
        #expect(origin.connectionCount == 0)
    }

    @Test func connectTimeoutIsATimeout() async throws {
        // A listener that never accepts, its queue full: a connect hangs (all on loopback).
        let (port, descriptors) = try OriginSocket.silentListenerWithFullQueue()
        defer { descriptors.forEach { close($0) } }
        var request = TransferRequest.test("http://127.0.0.1:\(port)/file")
        request.connectTimeout = 0.5
        let recorder = try await Self.attempt(request)

        #expect(try await recorder.failureKind() == .connectTimeout)
    }

    @Test func aTLSHandshakeThatNeverAnswersIsAConnectTimeout() async throws {
        let listener = try RawListener(.neverAnswer)
        defer { listener.stop() }
        var request = TransferRequest.test("https://127.0.0.1:\(listener.port)/file")
        request.connectTimeout = 0.5
        let recorder = try await Self.attempt(request)

        #expect(try await recorder.failureKind() == .connectTimeout)
        #expect(listener.bytesReceived > 0)  // The ClientHello went out.
    }

    @Test func aServerThatAcceptsAndNeverAnswersIsAHeadTimeout() async throws {
        let listener = try RawListener(.neverAnswer)
        defer { listener.stop() }
        var request = TransferRequest.test("http://127.0.0.1:\(listener.port)/file", stallTimeout: 0.2)
        request.headTimeout = 0.6
        let start = Date()
        let recorder = try await Self.attempt(request)

        guard case .failure(let failure) = try await recorder.outcome() else { Issue.record("fetched"); return }
        #expect(failure.kind == .headTimeout)
        #expect(failure.message == "no response head from 127.0.0.1 within 0.6 s of sending the request")
        #expect(Date().timeIntervalSince(start) >= 0.6)
        #expect(recorder.heads.isEmpty)
    }

    @Test func aTricklingHeadIsBoundedInTotalNotByIdleTime() async throws {
        let origin = try TestOrigin(bodySize: 10)
        defer { origin.stop() }
        origin.update { $0.headByteDelay = 0.02 }  // ~250 bytes of head: about 5 s in all.
        var request = TransferRequest.test(origin.url, stallTimeout: 0.3)
        request.headTimeout = 1
        let recorder = try await Self.attempt(request)

        #expect(try await recorder.failureKind() == .headTimeout)
        #expect(recorder.heads.isEmpty)
    }

    @Test func aSlowHeadWithinTheHeadTimeoutIsFine() async throws {
        let origin = try TestOrigin(bodySize: 10)
        defer { origin.stop() }
        origin.update { $0.headByteDelay = 0.002 }
        var request = TransferRequest.test(origin.url, stallTimeout: 0.2)
        request.headTimeout = 10
        let recorder = try await Self.attempt(request)

        guard case .success = try await recorder.outcome() else { Issue.record("failed"); return }
        #expect(recorder.sink.bytes == origin.expectedBody())
    }

    @Test func bytesAfterTheAnnouncedEndAreSeenWhateverTheReadsLookLike() async throws {
        for size in [10, 100_000, 1_000_000] {
            let origin = try TestOrigin(bodySize: size)
            defer { origin.stop() }
            origin.update { $0.contentLengthDelta = -1 }  // The last byte comes 50 ms after the others.
            let recorder = try await Self.attempt(.test(origin.url))

            #expect(try await recorder.failureKind() == .contentLengthMismatch, "\(size)")
            #expect(recorder.sink.count == size - 1)
        }
    }

    @Test func aBodyCutBeforeItsAnnouncedEndIsAConnectionFailure() async throws {
        let origin = try TestOrigin(bodySize: 100_000)
        defer { origin.stop() }
        origin.update { $0.contentLengthDelta = 1 }
        let recorder = try await Self.attempt(.test(origin.url))

        guard case .failure(let failure) = try await recorder.outcome() else { Issue.record("fetched"); return }
        #expect(failure.kind == .connection)
        #expect(failure.message == "the body ended after 100000 of the 100001 bytes its Content-Length announced")
    }

    @Test func anOriginThatKeepsTheConnectionOpenAfterACompleteBodyIsDoneAfterAGrace() async throws {
        let origin = try TestOrigin(bodySize: 100_000)
        defer { origin.stop() }
        origin.update {
            $0.ignoreConnectionClose = true
            $0.idleTimeout = 120  // Longer than the wait below: only the transfer's own grace can end it.
        }
        let driver = CurlTransferDriver()
        defer { driver.shutdown() }
        let recorder = TransferRecorder()
        _ = driver.start(.test(origin.url, stallTimeout: 100), delegate: recorder)
        let summary = try await recorder.outcome(timeout: 60).get()

        #expect(summary.bodyBytes == 100_000)
        #expect(recorder.sink.bytes == origin.expectedBody())
        #expect(origin.requests().first?.header("connection") == "close")
    }

    @Test func connectionRefusedIsAConnectionFailure() async throws {
        let origin = try TestOrigin(bodySize: 10)
        let port = origin.port
        origin.stop()
        let recorder = try await Self.attempt(.test("http://127.0.0.1:\(port)/file"))

        #expect(try await recorder.failureKind() == .connection)
    }

    @Test func nonHTTPSchemesAreRefused() async throws {
        let recorder = try await Self.attempt(.test("file:///etc/passwd"))

        #expect(try await recorder.failureKind() == .connection)
        #expect(recorder.sink.count == 0)
    }

    @Test func manyConcurrentTransfersOnOneDriver() async throws {
        let origin = try TestOrigin(bodySize: 10)
        defer { origin.stop() }
        let paths = (0..<24).map { "/file\($0)" }
        for (index, path) in paths.enumerated() { origin.addResource(path: path, size: 100_000 + index * 7_919) }
        let driver = CurlTransferDriver()
        defer { driver.shutdown() }

        let recorders = paths.map { path in (path, TransferRecorder()) }
        for (path, recorder) in recorders { _ = driver.start(.test(origin.url(path)), delegate: recorder) }
        for (path, recorder) in recorders {
            let summary = try await recorder.outcome().get()
            #expect(summary.head.status == 200)
            #expect(recorder.sink.bytes == origin.expectedBody(path: path), "\(path)")
            #expect(recorder.finishCount == 1)
        }
    }

    @Test func aDelegateMayStartTheNextAttemptAndShutDownFromItsCallback() async throws {
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        origin.inject(.cut(afterBodyBytes: 400))
        let driver = CurlTransferDriver()
        let second = TransferRecorder()

        /// Retries from inside `didFinishWith` (on the transfer thread), like the engine may.
        final class Retrying: TransferDelegate, @unchecked Sendable {
            let driver: CurlTransferDriver
            let next: TransferRecorder
            let url: String
            let first = TransferRecorder()
            init(driver: CurlTransferDriver, next: TransferRecorder, url: String) {
                self.driver = driver
                self.next = next
                self.url = url
            }
            func transfer(didReceive head: ResponseHead) -> Result<BodySink, TransferFailure> {
                first.transfer(didReceive: head)
            }
            func transfer(didFinishWith result: Result<TransferSummary, TransferFailure>) {
                first.transfer(didFinishWith: result)
                _ = driver.start(.test(url, headers: [("Range", "bytes=\(first.sink.count)-")]), delegate: next)
            }
        }
        let retrying = Retrying(driver: driver, next: second, url: origin.url)
        _ = driver.start(.test(origin.url), delegate: retrying)

        #expect(try await retrying.first.failureKind() == .connection)
        let summary = try await second.outcome().get()
        #expect(summary.head.status == 206)
        #expect(retrying.first.sink.bytes + second.sink.bytes == origin.expectedBody())

        /// Shutting down from the transfer thread must not wait for itself.
        final class ShuttingDown: TransferDelegate, @unchecked Sendable {
            let driver: CurlTransferDriver
            let done = OneShot<Bool>()
            init(driver: CurlTransferDriver) { self.driver = driver }
            func transfer(didReceive head: ResponseHead) -> Result<BodySink, TransferFailure> {
                .success(CollectingSink())
            }
            func transfer(didFinishWith result: Result<TransferSummary, TransferFailure>) {
                driver.shutdown()
                done.set(true)
            }
        }
        let stopper = ShuttingDown(driver: driver)
        _ = driver.start(.test(origin.url), delegate: stopper)
        #expect(try await withTimeout(5) { try await stopper.done.value() })
    }

    @Test func shutdownCancelsRunningTransfers() async throws {
        let origin = try TestOrigin(bodySize: 10_000)
        defer { origin.stop() }
        // Only the shutdown may end it, however late a loaded machine runs this task.
        origin.update { $0.stallBound = 60 }
        origin.inject(.stall(afterBodyBytes: 10))
        let driver = CurlTransferDriver()
        let recorder = TransferRecorder()

        _ = driver.start(.test(origin.url, stallTimeout: 60), delegate: recorder)
        _ = try await withTimeout(10) { try await recorder.headArrived.value() }
        driver.shutdown()

        #expect(try await recorder.failureKind() == .cancelled)
        let late = try await Self.attempt(.test(origin.url), on: driver)
        #expect(try await late.failureKind() == .cancelled)
    }
}
