import Basics
import Foundation
import Glibc

// Segmented fetch: planning an attempt's segments at its accepted head, and starting its crew.
extension EngineCore {
    /// Under `lock`: a caller's `connections` raises what the download asks for; until a head
    /// tells the size, it is granted up to the operator's limit.
    func askConnections(_ record: DownloadRecord, _ request: DownloadRequest) {
        guard let asked = request.connections, asked > record.connectionsRequested else { return }
        record.connectionsRequested = asked
        if !record.isTransferring {
            record.connectionsGranted = SegmentPlanner.granted(requested: asked, limit: connectionLimit)
        }
    }

    /// Under `lock`, at an accepted head: the pieces this attempt fetches and on how many
    /// connections, or none (one connection): the download asked for more than one connection and
    /// may have them, the origin offers a strong validator, a known total and byte ranges, and the
    /// rest of the file is worth at least two segments of `SegmentPlanner.minimumSegment`; or it
    /// resumes pieces kept from before. Records what was granted.
    func planSegments(_ attempt: Attempt, _ head: ResponseHead, offset: Int64, total: Int64?, _ record: DownloadRecord) {
        attempt.segmentPlan = nil
        let kept = record.segments
        record.segments = nil
        let allowed = SegmentPlanner.allowsSegments(head, validator: record.validator, total: total)
        if offset == 0 { record.rangesOffered = allowed }
        let granted = SegmentPlanner.granted(requested: record.connectionsRequested, limit: connectionLimit)
        if offset > 0 && head.status == 200 {
            // A whole answer to a resume, of the kept version (`KeptBytesSkip`): the origin ignores
            // `Range`, whatever it says; ranged pieces would only be answered whole too.
            record.rangesOffered = false
            if granted > 1 { record.connectionsGranted = 1 }
            return
        }
        if let kept, offset > 0 || attempt.continuesTail, let total, kept.last?.end == total, record.validator != nil,
           let first = kept.firstIndex(where: { offset < $0.end }), kept[first].start <= offset {
            // The same version (a 206 under If-Range): every piece goes on where it stood; the
            // prefix from `offset`, those it already covers dropped. Pieces after the prefix that
            // hold bytes are continued also on one connection, piece by piece: one transfer to the
            // end would fetch their bytes again.
            var resumed = Array(kept[first...])
            resumed[0].next = offset
            let connections = record.segmentsRefused ? 1 : min(granted, resumed.count)
            record.connectionsGranted = connections
            let holdsBytes = resumed.dropFirst().contains { $0.next > $0.start }
            guard resumed.count > 1, connections > 1 || holdsBytes else { return }
            if connections == 1 { resumed = SegmentPlanner.mergingEmpty(resumed) }
            record.segments = resumed
            attempt.segmentPlan = resumed
            attempt.segmentConnections = connections
            return
        }
        guard granted > 1 else { return }
        guard !record.segmentsRefused, record.rangesOffered != false, allowed, let total else {
            record.connectionsGranted = 1
            return
        }
        let minimum = configuration.minimumSegmentBytes
        let connections = SegmentPlanner.connections(granted: granted, remaining: total - offset, minimumSegment: minimum)
        record.connectionsGranted = connections
        guard connections > 1 else { return }
        let pieces = SegmentPlanner.pieces(total: total, from: offset, minimumSegment: minimum)
        attempt.segmentPlan = pieces
        attempt.segmentConnections = connections
        record.segments = pieces
    }

    /// Transfer thread, once the head is accepted: the crew starts the segments after the prefix.
    /// When the partial cannot be opened for them, the attempt goes on alone on one connection.
    func startSegments(_ attempt: Attempt, _ head: ResponseHead) -> TransferFailure? {
        guard let plan = attempt.segmentPlan, let template = attempt.launched else { return nil }
        let facts: (validator: Validator, path: String, write: InPlaceWrites.PositionedWrite?)? = locked {
            guard let record = record(of: attempt), let validator = record.validator else { return nil }
            return (validator, partialPath(of: record), hooks.pieceWrite)
        }
        guard let facts, let total = plan.last?.end else { return nil }
        do throws(SystemError) {
            let crew = try SegmentCrew(attempt: attempt, core: self, driver: driver, template: template, head: head,
                                       validator: facts.validator, total: total, segments: plan,
                                       connections: attempt.segmentConnections, path: facts.path, write: facts.write,
                                       checkpoint: (checkpointBytes, configuration.checkpointInterval),
                                       probeWindow: configuration.segmentProbeSeconds)
            attempt.adopt(crew)
            crew.start()
        } catch {
            attempt.segmentPlan = nil
            decide { record(of: attempt)?.connectionsGranted = 1 }
        }
        return nil
    }

    /// Work queue, settling a segmented attempt whose segments are all complete: the bytes after the
    /// prefix, written in place, are read back once and hashed in file order (`PartialFile.absorb`).
    /// nil when there is nothing to absorb or it worked; a settlement when the disk failed.
    func absorbSegments(_ attempt: Attempt, _ partial: PartialFile) -> Settlement? {
        guard let crew = attempt.crew else { return nil }
        do throws(SystemError) {
            try partial.absorb(upTo: crew.total)
            return nil
        } catch {
            return .failed(.disk(error), discard: false)
        }
    }

    /// A checkpoint of a segmented attempt (transfer thread, or the crew's writer queue): on the work queue, fdatasync
    /// `descriptor` (a second descriptor of the partial's file; every segment's bytes up to `table` are in the
    /// file), close it, then record `table` as the segments' durable offsets if the attempt is
    /// still writing. The file's front that is in the file before the sync (the prefix's appends,
    /// the pieces hashed after it) is durable after it too: the stored offset goes that far, so a
    /// prefix that stopped at its piece's end between its own checkpoints is not fetched again.
    func checkpointSegments(_ attempt: Attempt, descriptor: Int32, table: [Segment], done: @escaping @Sendable () -> Void) {
        let (sync, inFile) = locked {
            (hooks.partialSync, record(of: attempt).flatMap { $0.lifecycle.attempt?.serial == attempt.serial ? $0.flushedBytes : nil } ?? 0)
        }
        workQueue.async { [self] in
            let failure = Self.checkpointSync(descriptor, sync)
            decide {
                defer { done() }
                guard let record = record(of: attempt), noteSync(failure, of: attempt, record), record.segments != nil else { return }
                handle(.checkpointSynced(serial: attempt.serial), for: record) { action in
                    guard action == .keepDurableOffset else { return false }
                    record.durableOffset = max(record.durableOffset, inFile)
                    var durable = table
                    durable[0].next = max(durable[0].start, min(record.durableOffset, durable[0].end))
                    record.segments = durable
                    return true
                }
            }
        }
    }

    /// Under `lock`, settling a segmented attempt that did not complete: its sync made every written
    /// byte durable, so each segment is kept as far as it was written (the prefix as far as the
    /// partial keeps it), unless the segments were abandoned.
    func keepSegments(of attempt: Attempt, _ record: DownloadRecord, keptPrefix: Int64, synced: Bool) {
        guard let crew = attempt.crew, synced || crew.abandoned else { return }  // Unsynced: the last checkpoint's stand.
        if crew.abandoned || record.validator == nil {
            record.segments = nil
            return
        }
        var table = crew.table
        table[0].next = min(max(table[0].start, keptPrefix), table[0].end)
        record.segments = table
        record.bytesWritten = max(keptPrefix, table.writtenBytes)
    }

    /// Start-up: a segmented partial keeps its segments (never beyond the `onDisk` bytes the file
    /// holds; bytes past a segment's durable offset are fetched again). False when there are none.
    func restoreSegments(_ record: DownloadRecord, onDisk: Int64) -> Bool {
        guard var table = record.segments, record.validator != nil else {
            record.segments = nil
            return false
        }
        for index in table.indices { table[index].next = max(table[index].start, min(table[index].next, onDisk)) }
        table[0].next = min(table[0].end, max(table[0].start, record.keptBytes))
        record.segments = table
        return true
    }
}
