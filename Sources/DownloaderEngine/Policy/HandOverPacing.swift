/// When a followed download's appended bytes go to the partial's write lane, where its `/fetch`
/// readers can read them: pure decisions from the bytes held back and how long the oldest waited.
///
/// Handing over every libcurl piece (16 KiB) made each one a `write(2)`, a decision under the
/// engine's lock and a wake of every reader: measured with 50 readers of a 256 MiB fetch, 16 800
/// writes and ~56 000 futex calls, and small page-cache folios that every reader's `sendfile` then
/// looks up page by page. Held back until `minBytes` gather (or the oldest waited `maxDelay`), the
/// same bytes go out in ~16× fewer, larger writes. The first bytes of an attempt go at once: a
/// reader's first byte never waits for a batch.
struct HandOverPacing: Equatable, Sendable {
    static let defaultMinBytes = 256 << 10
    /// Seconds a held byte waits at most (the transfer thread asks again when idle: `dueIn`).
    static let defaultMaxDelay = 0.005

    let minBytes: Int
    let maxDelay: Double

    init(minBytes: Int = Self.defaultMinBytes, maxDelay: Double = Self.defaultMaxDelay) {
        self.minBytes = max(1, minBytes)
        self.maxDelay = max(0, maxDelay)
    }

    /// `pending` bytes are appended and not handed over, the oldest for `waited` seconds;
    /// `first`: nothing of this attempt was handed over yet.
    func handOverNow(pending: Int, waited: Double, first: Bool) -> Bool {
        pending > 0 && (first || pending >= minBytes || waited >= maxDelay)
    }

    /// Seconds until held bytes are due (for the transfer thread's next look while no byte comes);
    /// nil when nothing is held.
    func dueIn(pending: Int, waited: Double) -> Double? {
        pending > 0 ? max(0, maxDelay - waited) : nil
    }
}
