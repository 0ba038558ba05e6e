/// When the pieces written in place by a segmented attempt's fetches are synced and journaled
/// (`EngineCore.checkpointSegments`): pure, table-tested. One checkpoint at a time, once at least
/// `bytes` were written since the last one began or `seconds` passed; none once the attempt stops.
struct CheckpointPacing: Equatable, Sendable {
    let bytes: Int64
    let seconds: Double
    private(set) var inFlight = false
    private var unsynced: Int64 = 0
    private var last: Double

    init(bytes: Int64, seconds: Double, now: Double) {
        self.bytes = max(1, bytes)
        self.seconds = max(0, seconds)
        last = now
    }

    /// `count` bytes were written at `now`: true when a checkpoint of everything written so far
    /// begins now (it is then in flight until `ended`).
    mutating func wrote(_ count: Int64, at now: Double, stopping: Bool) -> Bool {
        unsynced += count
        guard !inFlight, !stopping, unsynced >= bytes || now - last >= seconds else { return false }
        inFlight = true
        unsynced = 0
        last = now
        return true
    }

    /// The checkpoint in flight ended (synced or not).
    mutating func ended() {
        inFlight = false
    }
}
