/// Cluster mode: how long a completed download stays held (in memory, its lease renewed) after it
/// completed or a caller last joined it, before the holder lets it go. Pure: the clock is an argument.
///
/// Why: joining a completed download needs its lease (the caller's token is a fenced row write). Let
/// go at once, a burst of callers spread over the replicas makes every replica take the lease, adopt
/// the row, answer and release in turn, and a request forwarded to the replica that held it a moment
/// ago finds it held by a third one: after five such refusals the caller got `503 held_elsewhere`
/// (ClusterReplicasLiveTests.threeHundredCallersOnThreeReplicasShareOneUpstreamGET, 2 of 3 runs
/// alone). Lingering, one replica answers the whole burst and the others forward to it.
struct LeaseLinger: Sendable, Equatable {
    /// Seconds a completed download stays held after its completion or its last join
    /// (`ClusterReplica.completedLinger`).
    var seconds: Double

    /// Until when (monotonic) a download that completed or was joined at `now` stays held; nil:
    /// not at all (a download that is not completed is held while it is live, and no longer).
    func until(completed: Bool, now: Double) -> Double? {
        completed ? now + seconds : nil
    }

    /// Seconds left before a download held `until` may be let go at `now`; nil: now.
    func remaining(until: Double?, now: Double) -> Double? {
        guard let until, until > now else { return nil }
        return until - now
    }
}
