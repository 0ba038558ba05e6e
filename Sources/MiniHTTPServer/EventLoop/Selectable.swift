/// Something registered with an `EventLoop` for readiness events.
protocol Selectable: AnyObject {
    func handleEvent(_ events: UInt32)
    /// A deadline scheduled with `schedule(at:fd:registrationID:)` passed.
    func timerFired(deadline: UInt64)
}

extension Selectable {
    func timerFired(deadline: UInt64) {}
}
