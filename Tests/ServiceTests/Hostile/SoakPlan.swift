/// What one round of `FaultSoakTests` does: a fault at the origin, what the callers do, and the
/// outcome the service must reach. Pure and seeded, so a failing round can be replayed.
struct SoakRound: Sendable, CustomStringConvertible {
    enum Fault: Sendable {
        case none
        /// Close the connection after these body bytes, one request after another.
        case cuts([Int])
        /// Reset (RST) after this many body bytes.
        case reset(Int)
        /// Send this many bytes, then nothing: the service's stall timeout reconnects.
        case stall(Int)
        /// Close after this many bytes having replaced the body: the resume must restart from 0.
        case changeVersion(Int)
        /// Answer 500 this many times, then serve.
        case serverErrors(Int)
        /// Answer 404.
        case notFound
        /// Answer 500 to every attempt.
        case serverErrorsForever

        var name: String {
            switch self {
            case .none: "none"
            case .cuts: "cuts"
            case .reset: "reset"
            case .stall: "stall"
            case .changeVersion: "etag-change"
            case .serverErrors: "500-then-ok"
            case .notFound: "404"
            case .serverErrorsForever: "500-forever"
            }
        }
    }

    /// How the download must end.
    enum Outcome: Equatable, Sendable {
        case identical
        case failed(code: String, httpStatus: Int)
    }

    var index: Int
    var size: Int
    var fault: Fault
    /// Another caller opens the progress stream, reads one event and drops the connection.
    var dropsProgressStream: Bool
    /// After the end, a caller asks for the file and drops the connection after the head.
    var dropsFileDownload: Bool

    var outcome: Outcome {
        switch fault {
        case .notFound: .failed(code: "http_error", httpStatus: 404)
        case .serverErrorsForever: .failed(code: "retries_exhausted", httpStatus: 500)
        default: .identical
        }
    }

    var description: String {
        "round \(index): \(size) bytes, fault \(fault), drops stream \(dropsProgressStream), drops file \(dropsFileDownload)"
    }

    /// Round `index` of the soak seeded with `seed`. Bodies are small (16–96 KiB) so rounds are
    /// fast; one in 16 is 2 MiB, so a dropped file download really leaves mid-body. `only` forces the
    /// fault (a value of the 0..<100 pick) and turns the drop-outs off, for investigating one path.
    static func make(index: Int, seed: UInt64, only: Int? = nil) -> SoakRound {
        var random = SplitMix64(seed: seed ^ (UInt64(index) &* 0x9e37_79b9_7f4a_7c15))
        let large = random.below(16) == 0
        let size = large ? 2 << 20 : 16 * 1024 + random.below(80 * 1024)
        func offset() -> Int { random.below(size - 1) }
        let fault: Fault
        switch only ?? random.below(100) {
        case 0..<10: fault = .none
        case 10..<35: fault = .cuts((0...random.below(3)).map { _ in offset() / 2 })
        case 35..<50: fault = .reset(offset())
        case 50..<60: fault = .stall(offset())
        case 60..<75: fault = .changeVersion(offset())
        case 75..<88: fault = .serverErrors(1 + random.below(3))
        case 88..<95: fault = .notFound
        default: fault = .serverErrorsForever
        }
        return SoakRound(index: index, size: size, fault: fault,
                         dropsProgressStream: only == nil && random.below(3) == 0,
                         dropsFileDownload: only == nil && (large || random.below(4) == 0))
    }
}
