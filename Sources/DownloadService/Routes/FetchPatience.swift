/// How long a `/fetch` reader waits, before its answer's head, for a download that is not moving
/// on: queued behind `--max-concurrent` (`queuedLimit`, then `503 queued`), held by the operator
/// (`stallTimeout`, then `504 stalled`), or waiting for disk space (`stallTimeout`, then `503
/// disk_full`; the route counts that wait only while other callers want the download too). Each
/// wait is counted while it lasts and starts again from 0 once the download leaves that stand.
/// Pure: the route reports what it saw and how long it waited.
struct FetchPatience: Equatable {
    /// Where the download stands, as the reader last saw it.
    enum Stand: Equatable {
        case moving, queued, held, waitingForSpace
    }

    enum Verdict: Equatable {
        case wait, giveUpQueued, giveUpHeld, giveUpForSpace
    }

    let queuedLimit: Double
    let stallTimeout: Double
    private(set) var waited: [Stand: Double] = [:]

    init(queuedLimit: Double, stallTimeout: Double) {
        self.queuedLimit = queuedLimit
        self.stallTimeout = stallTimeout
    }

    /// The download stands at `stand`: the other waits start again; a give-up verdict once this
    /// one has lasted its limit.
    mutating func judge(_ stand: Stand) -> Verdict {
        waited = waited.filter { $0.key == stand }
        let so = waited[stand] ?? 0
        switch stand {
        case .moving: return .wait
        case .queued: return so >= queuedLimit ? .giveUpQueued : .wait
        case .held: return so >= stallTimeout ? .giveUpHeld : .wait
        case .waitingForSpace: return so >= stallTimeout ? .giveUpForSpace : .wait
        }
    }

    /// The reader waited `seconds` while the download stood at `stand`.
    mutating func waited(_ seconds: Double, at stand: Stand) {
        guard stand != .moving else { return }
        waited[stand, default: 0] += max(0, seconds)
    }
}
