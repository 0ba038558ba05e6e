import Foundation
import Synchronization

/// Set once a shutdown signal began the stop: `/readyz` answers `503 shutting_down` from then on.
/// A SIGTERM first waits `--shutdown-delay` seconds with every other route working, so a load
/// balancer or Kubernetes (which sends SIGTERM as it starts taking the pod out of its endpoints)
/// stops sending new requests before the listener closes. Another signal during that wait ends
/// the wait (the graceful stop starts at once); one during the stop itself exits at once.
final class ShutdownDrain: Sendable {
    private enum Phase {
        case serving, delaying, stopping
    }

    private let phase = Mutex(Phase.serving)
    /// `--shutdown-delay`.
    let delay: Double

    init(delay: Double = 0) {
        self.delay = delay
    }

    /// What the first `signal` waits: the delay after a SIGTERM, nothing after another (an
    /// operator's Ctrl-C).
    func delay(after signal: Int32) -> Double { signal == SIGTERM ? delay : 0 }

    var isDraining: Bool { phase.withLock { $0 != .serving } }

    /// The first signal: waits `delay` seconds (unless cut short), then returns (the stop follows).
    func begin(delay: Double) async {
        let delaying = phase.withLock { phase -> Bool in
            guard phase == .serving else { return false }
            phase = delay > 0 ? .delaying : .stopping
            return delay > 0
        }
        guard delaying else { return }
        let end = ContinuousClock.now.advanced(by: .seconds(delay))
        while ContinuousClock.now < end, phase.withLock({ $0 == .delaying }) {
            try? await Task.sleep(for: .milliseconds(50))
        }
        phase.withLock { $0 = .stopping }
    }

    /// A signal after the first: true when it ended the delay (the graceful stop goes on); false
    /// when the stop was under way already (the caller exits at once).
    func cutDelay() -> Bool {
        phase.withLock { phase in
            guard phase == .delaying else { return false }
            phase = .stopping
            return true
        }
    }
}
