/// A download as the cluster database shows it to a replica that does not run it: its stored row,
/// how many live caller tokens it has there, and the holder's heartbeat while the epoch that wrote
/// it holds an active lease (`ClusterReader` leaves out any other).
struct ClusterRow: Sendable, Equatable {
    var stored: StoredDownload
    var tokenCount: Int
    var heartbeat: Heartbeat?

    init(stored: StoredDownload, tokenCount: Int? = nil, heartbeat: Heartbeat? = nil) {
        self.stored = stored
        self.tokenCount = tokenCount ?? stored.tokens.count
        self.heartbeat = heartbeat
    }

    /// The snapshot the holder's engine shows of the download (within a heartbeat): built by the
    /// engine's own `DownloadRecord.snapshot()` from the row, with what the row cannot say taken
    /// from the heartbeat: the running state (a record restored from a row is queued until it
    /// runs), the bytes so far, callers with readers, the rate of a download that is transferring,
    /// its connections, and why it waits (`disk_full`). Without a heartbeat, as a restarted engine shows it. `ignoring`:
    /// the query parameters shown redacted (`coalesceIgnoreQuery`).
    func snapshot(ignoring: Set<String>) -> DownloadSnapshot {
        let record = DownloadRecord(stored: stored, tau: 1, progressInterval: 0, ignoring: ignoring)
        if let heartbeat {
            record.bytesWritten = heartbeat.bytesWritten
            record.connectionsGranted = heartbeat.connectionsGranted
        }
        var s = record.snapshot()
        s.state = stored.state
        s.callers = heartbeat?.callers ?? tokenCount
        if stored.state == .downloading, let heartbeat {
            s.bytesPerSecond = heartbeat.bytesPerSecond
            s.etaSeconds = heartbeat.etaSeconds
            s.connections?.active = heartbeat.connectionsActive
            s.reason = heartbeat.reason
        }
        return s
    }
}
