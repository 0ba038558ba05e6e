import Testing
@testable import DownloaderEngine

/// How many tries of one receiver run at once (`ReceiverLanes`): pure decisions.
@Suite struct ReceiverLanesTests {
    @Test func aReceiverRunsAtMostItsLimitAndTheRestWaitInOrder() {
        var lanes = ReceiverLanes<Int>(limit: 2)
        #expect(lanes.admit(1, receiver: "a") == 1)
        #expect(lanes.admit(2, receiver: "a") == 2)
        #expect(lanes.admit(3, receiver: "a") == nil)
        #expect(lanes.admit(4, receiver: "a") == nil)
        #expect(lanes.admit(5, receiver: "b") == 5, "another receiver has its own lane")
        #expect(lanes.counts.running == 3 && lanes.counts.waiting == 2)
        #expect(lanes.ended(receiver: "a") == 3)
        #expect(lanes.ended(receiver: "a") == 4)
        #expect(lanes.ended(receiver: "a") == nil)
        #expect(lanes.ended(receiver: "a") == nil)
        #expect(lanes.ended(receiver: "b") == nil)
        #expect(lanes.counts.running == 0 && lanes.counts.waiting == 0)
        #expect(lanes.admit(6, receiver: "a") == 6, "room again once its tries ended")
    }

    @Test(arguments: [
        ("http://127.0.0.1:8080/hook?x=1", "127.0.0.1"),
        ("https://Hooks.Example.com/a", "hooks.example.com"),
        ("http://hooks.example.com:8443/b", "hooks.example.com"),  // one host behind many ports is one receiver
        ("http://[::1]:9000/c", "[::1]"),
    ])
    func aReceiverIsItsHost(url: String, receiver: String) {
        #expect(ReceiverLanes<Int>.receiver(of: url) == receiver)
    }
}
