import Testing
@testable import DownloaderEngine

@Suite struct TransferSlotsTests {
    @Test func grantsUpToCapacityThenQueuesInOrder() {
        var slots = TransferSlots(capacity: 2)
        let granted = ["a", "b", "c", "d", "c"].map { slots.request($0) }
        #expect(granted == [true, true, false, false, false])
        #expect(slots.waiting == ["c", "d"] && slots.active == 2)
        let again = slots.request("a")
        #expect(again, "a holder asking again keeps its slot")
        let next = slots.release("a")
        #expect(next == "c")
        let stranger = slots.release("x")
        #expect(stranger == nil, "not a holder: nothing freed")
        slots.leave("d")
        let none = slots.release("b")
        #expect(none == nil && slots.active == 1)
    }

    /// A freed slot goes to the client holding the fewest, among those to the one served least
    /// recently (round robin), and within a client to its longest-waiting download: one client's
    /// many downloads do not starve another's one; unnamed clients count as one.
    @Test func aFreedSlotGoesToTheClientHoldingTheFewestServedLeastRecently() {
        var slots = TransferSlots(capacity: 2)
        let asked = [("a1", "A"), ("a2", "A"), ("a3", "A"), ("a4", "A"), ("b1", "B"), ("c1", "C")]
        #expect(asked.map { slots.request($0.0, client: $0.1) } == [true, true, false, false, false, false])
        #expect(slots.waiting == ["a3", "a4", "b1", "c1"])
        #expect(slots.release("a1") == "b1", "A holds one, B none: B's, though A's a3 waited longer")
        #expect(slots.release("a2") == "c1", "A and C hold none: C was never served")
        #expect(slots.release("b1") == "a3", "A holds none, C one")
        #expect(slots.release("c1") == "a4")
        #expect(slots.holders == ["a3", "a4"] && slots.waiting.isEmpty)
        slots.leave("a4")  // Not waiting: nothing changes.
        #expect(slots.active == 2)

        // Five clients with queues, then one more asking once: its turn comes within a round.
        var busy = TransferSlots(capacity: 2)
        _ = busy.request("h1", client: "H")
        _ = busy.request("h2", client: "H")
        for client in ["A", "B", "C"] {
            for n in 1...3 { _ = busy.request("\(client)\(n)", client: client) }
        }
        _ = busy.request("F1", client: "F")
        var granted: [String] = []
        for holder in ["h1", "h2", "A1", "B1"] { granted += busy.release(holder).map { [$0] } ?? [] }
        #expect(granted == ["A1", "B1", "C1", "F1"], "FIFO would have served F1 tenth")

        var unnamed = TransferSlots(capacity: 1)
        #expect(["x", "y", "z"].map { unnamed.request($0) } == [true, false, false])
        #expect(unnamed.release("x") == "y" && unnamed.release("y") == "z", "FIFO")
    }

    @Test func grantsNothingWhileShuttingDown() {
        var slots = TransferSlots(capacity: 1)
        let granted = ["a", "b"].map { slots.request($0) }
        #expect(granted == [true, false])
        let next = slots.release("a", granting: false)
        #expect(next == nil)
        #expect(slots.active == 0 && slots.waiting == ["b"])
        slots.clearWaiting()
        #expect(slots.waiting.isEmpty)
        #expect(TransferSlots(capacity: 0).capacity == 1)
    }
}

@Suite struct ProgressThrottleTests {
    @Test func emitsOncePerIntervalAndArmsOneTrailingTimer() {
        var t = ProgressThrottle(interval: 1)
        var decisions = [t.bytesArrived(at: 10)]
        t.emitted(at: 10, bytes: 100)
        decisions += [t.bytesArrived(at: 10.25), t.bytesArrived(at: 10.5)]
        #expect(decisions == [.emit, .scheduleTrailing(after: 0.75), .wait], "one trailing timer at a time")
        let due = t.trailingDue(bytes: 300)
        #expect(due, "bytes not told yet")
        t.emitted(at: 11, bytes: 300)
        let next = t.bytesArrived(at: 12)
        #expect(next == .emit)
    }

    @Test func trailingTimerStaysQuietWhenNothingNewArrived() {
        var t = ProgressThrottle(interval: 1)
        t.emitted(at: 5, bytes: 42)
        var decisions = [t.bytesArrived(at: 5.5)]
        let due = t.trailingDue(bytes: 42)
        #expect(!due)
        t.restart(at: 9)
        decisions.append(t.bytesArrived(at: 9.5))
        #expect(decisions == [.scheduleTrailing(after: 0.5), .scheduleTrailing(after: 0.5)])
    }
}
