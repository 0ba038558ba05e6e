/// Whether a segmented download's extra connections pay: pure decisions from the bytes written over
/// all its connections and the time. More connections only help when the origin (or the path to it)
/// caps each connection; on an origin that does not, they split the same bandwidth and CPU and cost
/// ranged requests and a read-back of every piece after the prefix (measured on loopback: four
/// connections at 0.6–0.8× of one). So the download starts alone, its first connection running on
/// through the pieces nobody has; its rate alone is measured over `window` seconds after a first
/// `window` of warm-up (measured from its first bytes, one connection on an uncapped loopback
/// origin read 475 MB/s against the ~800 it keeps later, so a probe beside it "gained" 1.8× and
/// all four opened); then one more connection (the probe) opens;
/// when the bytes per second over both, during `window` seconds from the probe's first body byte,
/// are at least `gain` times what the first connection did alone, every granted connection opens,
/// else the download stays on one (the probe finishes its piece and takes no other). While it
/// measures, the probe takes its pieces from the end of the file, so that the first connection runs
/// on undisturbed and, when one connection is kept, only the probe's pieces are read back.
/// A "no" is tried again after `4 * window` seconds, then twice as long each time: a rate measured
/// over a fraction of a second on a busy machine can mislead, and a wrong "no" on an origin that
/// caps each connection costs far more (the download at 1/N of its speed) than a wrong "yes" (the
/// pieces' overhead) or another probe.
/// No probe opens, first or again, when the rest of the file would take less than those
/// `4 * window` seconds at the rate one connection has alone: more connections could no longer
/// pay (the probe's own window is a quarter of that time, the other connections would open for
/// the rest only), while the probe's window and pieces (read back at the very end, after the
/// first connection reached them) lengthen the download. On the benchmark VM a 1 GiB file from an
/// uncapped loopback origin is that case: one connection alone runs at 0.9-1.2 GB/s and half the
/// file is written when its rate is known; the probe's window cost it 0.1-0.4 s of ~1.8.
/// A `window` of 0 opens every connection at once (no probe).
struct ConnectionProbe: Equatable, Sendable {
    /// The probe's connections together must bring this much more than one alone.
    static let gain = 1.25
    /// A "no" is tried again after this many windows, doubled after each further "no".
    static let retryWindows = 4.0

    enum Phase: Equatable, Sendable {
        /// One connection warming up from its first bytes at `since` (nil until they come):
        /// nothing is measured.
        case warming(since: Double?)
        /// One connection; measuring from `since`.
        case alone(since: Double, written: Int64)
        /// The probe is open; its bytes have not arrived yet. `rate`: bytes/s of the first alone.
        case opened(rate: Double)
        /// Both run; measuring from `since`.
        case probing(since: Double, written: Int64, rate: Double)
        /// Decided: every granted connection (`true`) or one.
        case decided(split: Bool)
    }

    /// What the crew does next.
    enum Step: Equatable, Sendable {
        case none
        /// Open one more connection, on a piece far from the first's (the last nobody has).
        case openProbe
        /// Open every granted connection.
        case openAll
    }

    /// A decision and the rates it was made from (bytes per second; `probed` nil: no probe, too
    /// little was left).
    struct Verdict: Equatable, Sendable {
        var split: Bool
        var alone: Double
        var probed: Double?
    }

    let window: Double
    private(set) var phase: Phase
    /// The newest decision (for the download's story), and how many were made.
    private(set) var verdict: Verdict?
    private(set) var decisions = 0
    /// "No"s so far, and when the last one is tried again.
    private(set) var refusals = 0
    private var retryAt = Double.infinity
    /// Bytes per second of one connection alone, at the last "no".
    private var rateAlone = 0.0

    init(window: Double) {
        self.window = max(0, window)
        phase = self.window > 0 ? .warming(since: nil) : .decided(split: true)
    }

    /// The probe is open and its window not over.
    var measuring: Bool {
        switch phase {
        case .opened, .probing: return true
        default: return false
        }
    }

    /// Connections the download may have open now (`granted`: the most it may ever have).
    func allowed(granted: Int) -> Int {
        switch phase {
        case .warming, .alone: return 1
        case .opened, .probing: return min(2, granted)
        case .decided(let split): return split ? granted : 1
        }
    }

    /// Told `written` (bytes written over all connections, from any start) at `now`; `remaining`:
    /// the bytes the download still needs.
    mutating func observe(written: Int64, at now: Double, remaining: Int64 = .max) -> Step {
        switch phase {
        case .warming(let since):
            guard let since else {
                phase = .warming(since: now)
                return .none
            }
            if now - since >= window { phase = .alone(since: now, written: written) }
            return .none
        case .alone(let since, let start):
            guard now - since >= window else { return .none }
            let rate = Double(written - start) / (now - since)
            guard leavesTimeToPay(remaining, rate) else {
                phase = .decided(split: false)
                retryAt = .infinity
                verdict = Verdict(split: false, alone: rate, probed: nil)
                decisions += 1
                return .none
            }
            phase = .opened(rate: rate)
            return .openProbe
        case .probing(let since, let start, let rate):
            guard now - since >= window else { return .none }
            let both = Double(written - start) / (now - since)
            let split = both >= rate * Self.gain
            phase = .decided(split: split)
            verdict = Verdict(split: split, alone: rate, probed: both)
            decisions += 1
            if !split {
                refusals += 1
                rateAlone = rate
                retryAt = now + window * Self.retryWindows * Double(1 << min(refusals - 1, 16))
            }
            return split ? .openAll : .none
        case .decided(let split):
            guard !split, now >= retryAt else { return .none }
            if !leavesTimeToPay(remaining, rateAlone) {
                retryAt = .infinity  // Never again.
            } else {
                phase = .alone(since: now, written: written)  // Measure again (warm by now).
            }
            return .none
        case .opened:
            return .none
        }
    }

    /// Whether `remaining` bytes at `rate` (one connection's alone) take long enough for more
    /// connections to pay: at least `retryWindows` windows.
    private func leavesTimeToPay(_ remaining: Int64, _ rate: Double) -> Bool {
        Double(remaining) >= rate * window * Self.retryWindows
    }

    /// The probe's first body bytes arrived; `written` over all connections at `now`.
    mutating func probeBegan(written: Int64, at now: Double) {
        guard case .opened(let rate) = phase else { return }
        phase = .probing(since: now, written: written, rate: rate)
    }
}
