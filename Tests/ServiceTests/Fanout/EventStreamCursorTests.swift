import DownloaderEngine
import Foundation
import Testing
@testable import DownloadService

/// What a progress stream writes for a sequence of events (ids, retry, repeated progress, the end).
@Suite struct EventStreamCursorTests {
    private static let created = Date(timeIntervalSince1970: 1_800_000_000)

    private static func snapshot(_ bytes: Int64, state: DownloadState = .downloading, at second: Double = 0) -> DownloadSnapshot {
        var s = DownloadSnapshot(id: "d1", url: "http://o/f", state: state, storage: .cache, createdAt: created,
                                 updatedAt: created.addingTimeInterval(second))
        s.bytesWritten = bytes
        return s
    }

    private static func text(_ bytes: [UInt8]?) -> String? { bytes.map { String(decoding: $0, as: UTF8.self) } }

    @Test func writesIdsRetryAndEndsAfterTheTerminalEvent() {
        var cursor = EventStreamCursor(firstID: 8)
        let data: (DownloadEvent) -> String = { "{\"b\":\($0.snapshot.bytesWritten)}" }
        let steps: [(DownloadEvent, String?)] = [
            (.progress(Self.snapshot(1)), "retry: 2000\nid: 8\nevent: progress\ndata: {\"b\":1}\n\n"),
            (.progress(Self.snapshot(2, at: 1)), "id: 9\nevent: progress\ndata: {\"b\":2}\n\n"),
            (.progress(Self.snapshot(5, at: 3)), "id: 10\nevent: progress\ndata: {\"b\":5}\n\n"),
            // The same progress again (a stream that fell behind is handed the newest twice): once.
            (.progress(Self.snapshot(5, at: 3)), nil),
            // Same bytes, later: a newer snapshot.
            (.progress(Self.snapshot(5, at: 4)), "id: 11\nevent: progress\ndata: {\"b\":5}\n\n"),
            (.paused(Self.snapshot(5, state: .paused, at: 4)), "id: 12\nevent: paused\ndata: {\"b\":5}\n\n"),
            // The end puts a reconnect off by an hour.
            (.completed(Self.snapshot(9, state: .completed, at: 5)), "retry: 3600000\nid: 13\nevent: completed\ndata: {\"b\":9}\n\n"),
            (.progress(Self.snapshot(9, at: 6)), nil),  // nothing after the end
        ]
        for (event, expected) in steps {
            let written = cursor.frame(for: event, data: data)
            #expect(Self.text(written) == expected)
            if case .paused = event { #expect(cursor.lastWasLifecycle) }
        }
        #expect(cursor.ended)
        #expect(cursor.nextID == 14)
    }

    /// A download that had ended: its terminal event is the first and only one, with the end's retry.
    @Test func aStreamThatStartsAtTheEndPutsTheReconnectOff() {
        var cursor = EventStreamCursor(firstID: 1)
        let written = cursor.frame(for: .failed(Self.snapshot(3, state: .failed)), data: { _ in "{}" })
        #expect(Self.text(written) == "retry: 3600000\nid: 1\nevent: failed\ndata: {}\n\n")
        #expect(cursor.ended)
    }

    @Test(arguments: [
        ("{\"a\":1}", "progress", 2000 as Int?),
        ("{\"a\":1}", "completed", nil),
        ("line one\nline two", "progress", nil),  // multi-line data: one data: line each
        ("cr\rinside", "failed", 2000),
        ("", "paused", nil),
        (String(repeating: "x", count: 300) + "\n", "progress", nil),  // a break at the very end
    ])
    func frameMatchesServerSentEventEncoding(data: String, event: String, retry: Int?) {
        var sse = ServerSentEvent(id: 42, event: event, data: data)
        sse.retryMilliseconds = retry
        #expect(EventStreamCursor.frame(id: 42, event: event, data: data, retryMilliseconds: retry) == Array(sse.encoded.utf8))
    }
}
