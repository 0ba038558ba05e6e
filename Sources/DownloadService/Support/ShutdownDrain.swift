import Synchronization

/// Set once a SIGTERM began the stop: `/readyz` answers `503 shutting_down` from then on, while
/// every other route keeps working for `--shutdown-delay` seconds, so a load balancer or Kubernetes
/// (which sends SIGTERM as it starts taking the pod out of its endpoints) stops sending new
/// requests before the listener closes.
final class ShutdownDrain: Sendable {
    private let draining = Atomic<Bool>(false)

    var isDraining: Bool { draining.load(ordering: .acquiring) }

    func begin() { draining.store(true, ordering: .releasing) }
}
