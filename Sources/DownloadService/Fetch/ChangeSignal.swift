import Dispatch
import Synchronization

/// Wakes one waiting task when the reader's view changes (bounded waits; cancellation ends them).
///
/// One continuation per wait, resumed by whichever comes first: a change (`signal`, from the
/// engine's thread), the timeout (a dispatch timer), or the task's cancellation. The waiting task
/// then goes on in one step on its executor (a `/fetch` handler: its event loop). The first
/// version raced a sleeping child task against a waiting one in a task group: each wake cost
/// three child tasks' jobs and the group's end, on the loop, one loop iteration after another,
/// while the readers already streaming were served in between; with 50 joiners waiting for the
/// origin's head their heads went out tens of milliseconds after it arrived.
final class ChangeSignal: Sendable {
    private struct State {
        /// A change came while nobody waited: the next wait returns at once.
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
        /// The current wait's number: a timer armed for an earlier wait does nothing.
        var wait: UInt64 = 0
    }

    private let state = Mutex(State())

    /// A change: wakes the waiter, or makes the next wait return at once.
    func signal() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard let waiter = s.waiter else {
                s.pending = true
                return nil
            }
            s.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns on a change (also one since the last wait), after `seconds`, or when cancelled.
    func wait(seconds: Double) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let number = state.withLock { s -> UInt64? in
                    if s.pending || Task.isCancelled {
                        s.pending = false
                        return nil
                    }
                    s.wait &+= 1
                    s.waiter = continuation
                    return s.wait
                }
                guard let number else {
                    continuation.resume()
                    return
                }
                DispatchQueue.global().asyncAfter(deadline: .now() + max(0, seconds)) { [weak self] in
                    self?.timedOut(wait: number)
                }
            }
        } onCancel: {
            self.signal()
        }
    }

    private func timedOut(wait number: UInt64) {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard s.wait == number, let waiter = s.waiter else { return nil }
            s.waiter = nil
            return waiter
        }
        waiter?.resume()
    }
}
