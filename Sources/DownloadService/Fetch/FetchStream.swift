import DownloaderEngine
import Foundation
import Glibc
import MiniHTTPServer

/// The body of a streaming `/fetch` answer: the download's bytes sent from its file on disk as they
/// land (`sendfile`, no buffer of its own; a slow client never slows the transfer or the others),
/// fed by the connection's event loop (`PushSource`). Its reader's interest ends with the response.
final class FetchStream: PushSource, @unchecked Sendable {
    private let reader: DownloadReader
    /// Seconds without a new byte after which the response is aborted (the engine's stall timeout).
    private let patience: Double
    // Loop thread only.
    private var cursor: FetchCursor
    private var file: ReadableFile?
    private var watching = false
    private var lastProgress: Double = 0
    /// `TailState.available` and `TailLiveness.landings` when the patience was last checked.
    private var lastAvailable: Int64 = -1
    private var lastLandings: UInt64 = 0
    /// Looks for the file in a row that found it nowhere (see `openRetries`).
    private var openMisses = 0

    /// A file found nowhere is looked for again this many times, 50 ms apart, before the response
    /// is aborted: it may have been renamed (published) before the state naming where it went
    /// reached this reader (the engine tells readers after its lock, in order, on whichever thread
    /// drains its effects). Another version or a removal ends the response at once (`FetchCursor`).
    static let openRetries = 20

    /// Bytes one `produce` queues at most; more waits for the loop's next turn (`wake`). The
    /// socket of a new or drained reader takes megabytes at once: sent in one go, every such
    /// reader's `sendfile` ran before the next joiner's head and first bytes (50 joiners of a
    /// download whose origin just answered got their first byte one after the other, up to
    /// ~100 ms apart in all). In turns of this size, each joiner's head and first bytes go out
    /// first, then the readers share the loop round-robin.
    static let slice: Int64 = 256 << 10

    init(reader: DownloadReader, plan: FetchPlan.Streaming, patience: Double) {
        self.reader = reader
        self.patience = max(1, patience)
        cursor = FetchCursor(plan)
    }

    func produce(_ stream: PushStream) {
        if !watching {
            watching = true
            lastProgress = stream.loopSeconds
            // Told of every change but new bytes (another version: abort before a queued range
            // could be read from the rewritten file), and of new bytes only after asking for them
            // (`.wait` below): a client that is behind is fed again once it drained (the loop asks
            // by itself), and the news of every batch would only cost the thread that tells.
            reader.watch { [weak stream] in stream?.wake() }
            checkPatience(stream)
        }
        var budget = Self.slice
        var askedForBytes = false
        while true {
            let tail = reader.state
            switch cursor.step(tail) {
            case .send(let from, let to):
                guard budget > 0 else {
                    stream.wake()  // more is there: after the others this loop serves
                    return
                }
                guard let file = open(tail) else {
                    openMisses += 1
                    guard openMisses <= Self.openRetries else {
                        stream.abort("/fetch: the file of this version could not be opened at \(tail.path)")
                        return
                    }
                    stream.after(0.05) { [weak stream] in stream?.wake() }
                    return
                }
                openMisses = 0
                let upTo = min(to, from + budget)
                stream.send(file, from: from, to: upTo)
                cursor.sent(upTo: upTo)
                budget -= upTo - from
                lastProgress = stream.loopSeconds
                if !stream.hasRoom { return }  // the client is behind: the loop asks again once it drained
            case .finish:
                stream.finish()
                return
            case .abort(let why):
                stream.abort("/fetch: \(why)")
                return
            case .fail(let why):
                stream.abortAfterQueued("/fetch: \(why)")
                return
            case .wait:
                guard !askedForBytes else { return }
                // Every byte there was is sent: told when more land; one more look for those
                // that landed before asking.
                reader.awaitMoreBytes()
                askedForBytes = true
            }
        }
    }

    func ended(_ stream: PushStream, completed: Bool) {
        file = nil
        reader.close()
    }

    /// The engine stops its transfers as the service shuts down: a body still waiting for bytes
    /// would only wait out the server's grace period. Ended at once, short (the client resumes
    /// elsewhere or later with `If-Range`), unless every byte it owes is on disk already (the file
    /// is complete, or a range ending before the bytes written).
    func serverShuttingDown(_ stream: PushStream) {
        let tail = reader.state
        let owedOnDisk = tail.phase == .flowing && cursor.plan.end.map { $0 < tail.available && !cursor.endsAtLastByte(tail) } ?? false
        if tail.phase != .completed && !owedOnDisk { stream.abort("/fetch: the service is shutting down") }
    }

    /// The file holding the bytes: opened once per response and checked to be this version's (a
    /// completed file is the same file renamed, so the open descriptor keeps serving it). `tail` may
    /// be a moment old: when the partial was renamed to its final path since, the newest state names
    /// where it is now, and the identity check still holds (a rename keeps the inode). Between that
    /// rename and the completion being recorded the file is at the state's `publishingPath` (a
    /// reader whose first bytes came then was aborted at byte 0: "closed inside the body").
    private func open(_ tail: TailState) -> ReadableFile? {
        if let file { return file }
        for path in Self.candidatePaths(tail, newest: reader.state) {
            guard let opened = ReadableFile.open(path) else { continue }
            if let expected = tail.file {
                var st = stat()
                guard fstat(opened.fd, &st) == 0, UInt64(st.st_dev) == expected.device, UInt64(st.st_ino) == expected.inode else {
                    continue
                }
            }
            file = opened
            return opened
        }
        return nil
    }

    /// Where this version's file may be, in order: the path `tail` names, where it is being
    /// published, and the same of the newest state when it is still this version.
    static func candidatePaths(_ tail: TailState, newest: TailState) -> [String] {
        var paths: [String] = []
        var states = [tail]
        if newest.generation == tail.generation { states.append(newest) }
        for state in states {
            for path in [state.path, state.publishingPath] {
                if let path, !path.isEmpty, !paths.contains(path) { paths.append(path) }
            }
        }
        return paths
    }

    /// No more bytes will land for this response: its download completed or failed.
    static func awaitsNothing(_ tail: TailState) -> Bool {
        switch tail.phase {
        case .completed, .failed: return true
        default: return false
        }
    }

    /// Every second: a response whose download made no progress for `patience` seconds is aborted.
    /// Progress is a byte landing on any of its connections (also while the client is behind and
    /// they wait in the file, and beyond the contiguous prefix this response follows), or its
    /// attempt being finished (verified, synced, published). A completed or failed download awaits
    /// nothing: what is left (of a failed one, what was queued before its abort) is sent at the
    /// client's pace (a client that takes nothing at all meets the server's write timeout).
    private func checkPatience(_ stream: PushStream) {
        stream.after(1) { [weak self, weak stream] in
            guard let self, let stream else { return }
            let tail = self.reader.state
            let (available, liveness) = (tail.available, self.reader.liveness)
            if Self.awaitsNothing(tail) || liveness.finishing || available != self.lastAvailable
                || liveness.landings != self.lastLandings {
                self.lastAvailable = available
                self.lastLandings = liveness.landings
                self.lastProgress = stream.loopSeconds
            }
            if stream.loopSeconds - self.lastProgress >= self.patience {
                stream.abort("/fetch: no new byte of the download for \(self.patience) s (the stall timeout)")
            } else {
                self.checkPatience(stream)
            }
        }
    }
}
