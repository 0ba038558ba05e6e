/// The timers of one attempt, as phases with deadlines. Pure (monotonic nanoseconds in, verdicts
/// out): `CurlMultiLoop` feeds it what happened and asks it, at each turn, whether the attempt ran
/// out of time and when to look again.
///
/// - `connecting`: from the start (and after each followed redirect) until the request is sent.
///   libcurl's `CURLOPT_CONNECTTIMEOUT_MS` bounds name lookup, TCP, TLS and a proxy's CONNECT and
///   reports first; this deadline (`connectTimeout` plus `connectGrace`) is only a backstop, and
///   the whole bound while the transfer resolves a name itself (proxy mode, `connectGrace` 0).
/// - `awaitingHead`: from the moment the request is sent until its response head has ended: a total
///   of `headTimeout`, however the bytes trickle in.
/// - `receiving`: after the final head, the attempt fails once nothing arrived for `stallTimeout`,
///   or (with a `minSpeed`) once a whole window of `stallTimeout` brought fewer bytes per second
///   than that: a trickle holds its transfer slot like a stall, and a new connection may do better.
/// - `draining`: every byte the Content-Length announced is in; the origin was asked to close
///   (`Connection: close`), and bytes arriving before it does are an error. An origin that keeps the
///   connection open anyway is taken as done after `drainGrace`.
struct AttemptDeadlines: Sendable, Equatable {
    enum Phase: Sendable, Equatable {
        case connecting(since: UInt64, grace: UInt64)
        case awaitingHead(sentAt: UInt64)
        case receiving(quietSince: UInt64, window: SpeedWindow)
        case draining(since: UInt64)
    }

    /// The body bytes counted since `start`, for `minSpeed`; `slowRate`: the last whole window's
    /// bytes per second, once one fell short.
    struct SpeedWindow: Sendable, Equatable {
        var start: UInt64
        var startBytes: Int64
        var slowRate: Double?
    }

    let connectTimeout: UInt64
    let headTimeout: UInt64
    let stallTimeout: UInt64
    /// Body bytes per second a window of `stallTimeout` must bring at least; 0: no such limit.
    let minSpeed: Int64
    private(set) var phase: Phase

    /// Backstop after libcurl's own connect timeout.
    static let connectGrace: UInt64 = 1_000_000_000
    /// How long a complete body waits for the origin's close.
    static let drainGrace: UInt64 = 1_000_000_000

    init(connectTimeout: Double, headTimeout: Double, stallTimeout: Double, minSpeed: Int64 = 0, startedAt now: UInt64) {
        self.connectTimeout = Self.nanoseconds(connectTimeout)
        self.headTimeout = Self.nanoseconds(headTimeout)
        self.stallTimeout = Self.nanoseconds(stallTimeout)
        self.minSpeed = max(0, minSpeed)
        phase = .connecting(since: now, grace: Self.connectGrace)
    }

    static func nanoseconds(_ seconds: Double) -> UInt64 { UInt64(max(0.001, seconds) * 1e9) }

    /// The loop could not look for `nanoseconds` until `now` (its thread was held, e.g. by a write
    /// the disk kept waiting): that time is no origin's slowness, so the speed window leaves it out
    /// (a window that began meanwhile starts at `now`).
    mutating func held(for nanoseconds: UInt64, until now: UInt64) {
        guard case .receiving(let quietSince, var window) = phase else { return }
        window.start = min(window.start + nanoseconds, max(now, window.start))
        phase = .receiving(quietSince: quietSince, window: window)
    }

    /// A new hop begins connecting (a redirect followed); `ownLookup`: the transfer resolves the
    /// name itself first, so nothing else bounds it.
    mutating func connecting(at now: UInt64, ownLookup: Bool = false) {
        phase = .connecting(since: now, grace: ownLookup ? 0 : Self.connectGrace)
    }

    /// The request is about to go out (libcurl's pre-request callback).
    mutating func requestSent(at now: UInt64) { phase = .awaitingHead(sentAt: now) }

    /// A hop's head ended: the final one starts the body; an interim one (a followed redirect)
    /// means connecting to the next hop.
    mutating func headEnded(at now: UInt64, final: Bool) {
        phase = final ? .receiving(quietSince: now, window: SpeedWindow(start: now, startBytes: 0))
            : .connecting(since: now, grace: Self.connectGrace)
    }

    /// Bytes arrived (body bytes, or header lines; only the body phase counts them); `received`:
    /// the body's bytes so far. A window of `stallTimeout` that ended is judged against `minSpeed`
    /// shared by `connections` (those of a segmented attempt each bring their part).
    mutating func activity(at now: UInt64, received: Int64 = 0, connections: Int = 1) {
        guard case .receiving(_, var window) = phase else { return }
        if minSpeed > 0, window.slowRate == nil, now >= window.start, now - window.start >= stallTimeout {
            let rate = Double(received - window.startBytes) / (Double(now - window.start) / 1e9)
            if rate < Double(minSpeed) / Double(max(1, connections)) {
                window.slowRate = rate
            } else {
                window = SpeedWindow(start: now, startBytes: received)
            }
        }
        phase = .receiving(quietSince: now, window: window)
    }

    /// The body reached its announced length.
    mutating func bodyComplete(at now: UInt64) { phase = .draining(since: now) }

    enum Verdict: Sendable, Equatable {
        /// Look again by this time.
        case runningUntil(UInt64)
        case expired(TransferFailure.Kind, seconds: Double)
        /// A whole window of `stallTimeout` brought fewer than `minSpeed` bytes per second (this many).
        case tooSlow(bytesPerSecond: Double)
        /// The body is complete and the origin did not close within `drainGrace`: done.
        case drained
    }

    func check(now: UInt64) -> Verdict {
        let (deadline, kind, limit): (UInt64, TransferFailure.Kind, UInt64)
        switch phase {
        case .draining(let since):
            return now >= since + Self.drainGrace ? .drained : .runningUntil(since + Self.drainGrace)
        case .connecting(let since, let grace): (deadline, kind, limit) = (since + connectTimeout + grace, .connectTimeout, connectTimeout)
        case .awaitingHead(let sentAt): (deadline, kind, limit) = (sentAt + headTimeout, .headTimeout, headTimeout)
        case .receiving(let quietSince, let window):
            if let rate = window.slowRate { return .tooSlow(bytesPerSecond: rate) }
            (deadline, kind, limit) = (quietSince + stallTimeout, .stalled, stallTimeout)
        }
        return now >= deadline ? .expired(kind, seconds: Double(limit) / 1e9) : .runningUntil(deadline)
    }
}
