import Dispatch

/// A value computed on `queue` while the caller does something else; `wait()` returns it (start-up:
/// the areas listed while the state store loads, files looked up while the records are built).
final class Background<Value>: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    // Written once on the queue before `done` is signalled; read after waiting for it.
    private var value: Value?

    init(on queue: DispatchQueue, _ work: @escaping @Sendable () -> Value) {
        queue.async {
            self.value = work()
            self.done.signal()
        }
    }

    /// Waits for the value (once).
    func wait() -> Value {
        done.wait()
        return value!
    }
}
