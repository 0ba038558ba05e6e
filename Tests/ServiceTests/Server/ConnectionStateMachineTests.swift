import Testing
@testable import MiniHTTPServer

@Suite("ConnectionStateMachine")
struct ConnectionStateMachineTests {
    @Test func keepAliveCycle() {
        var m = ConnectionStateMachine()
        #expect(m.deadline(writesPending: false) == .header)
        m.bytesReceived()
        #expect(m.headReceived(keepAlive: true, hasBody: false) == .startHandler)
        #expect(!m.wantsToRead)
        #expect(m.deadline(writesPending: false) == nil)
        #expect(m.deadline(writesPending: true) == .write)
        #expect(m.responseSent() == .resumeReading)
        #expect(m.wantsToRead)
        #expect(m.deadline(writesPending: false) == .idle)
        m.bytesReceived()
        #expect(m.deadline(writesPending: false) == .header)
    }

    @Test func bodyThenHandler() {
        var m = ConnectionStateMachine()
        m.bytesReceived()
        #expect(m.headReceived(keepAlive: true, hasBody: true) == .continueReading)
        #expect(m.wantsToRead)
        #expect(m.deadline(writesPending: false) == .body)
        #expect(m.bodyReceived() == .startHandler)
        #expect(m.state == .responding)
    }

    @Test func closeRequested() {
        var m = ConnectionStateMachine()
        m.bytesReceived()
        #expect(m.headReceived(keepAlive: false, hasBody: false) == .startHandler)
        #expect(m.responseSent() == .close)
        #expect(m.state == .closed)
    }

    @Test func responseCanForceClose() {
        var m = ConnectionStateMachine()
        _ = m.headReceived(keepAlive: true, hasBody: false)
        m.responseRequiresClose()
        #expect(m.responseSent() == .close)
    }

    @Test func parseErrorAnswersThenCloses() {
        var m = ConnectionStateMachine()
        m.bytesReceived()
        #expect(m.parseFailed(status: 431) == .sendErrorAndClose(status: 431))
        #expect(!m.keepAlive)
        #expect(m.responseSent() == .close)
    }

    @Test func timeouts() {
        var fresh = ConnectionStateMachine()
        #expect(fresh.timedOut() == .close)  // nothing sent at all: just close

        var slow = ConnectionStateMachine()
        slow.bytesReceived()
        #expect(slow.timedOut() == .sendErrorAndClose(status: 408))

        var body = ConnectionStateMachine()
        _ = body.headReceived(keepAlive: true, hasBody: true)
        #expect(body.timedOut() == .sendErrorAndClose(status: 408))

        var writing = ConnectionStateMachine()
        _ = writing.headReceived(keepAlive: true, hasBody: false)
        #expect(writing.timedOut() == .close)
    }

    @Test func peerCloseWhileRespondingFinishesResponse() {
        var m = ConnectionStateMachine()
        _ = m.headReceived(keepAlive: true, hasBody: false)
        #expect(m.peerClosed() == ConnectionStateMachine.Action.none)
        #expect(m.responseSent() == .close)

        var idle = ConnectionStateMachine()
        #expect(idle.peerClosed() == .close)
    }

    @Test func shutdownClosesIdleAndDrainsBusy() {
        var idle = ConnectionStateMachine()
        #expect(idle.shutdownRequested() == .close)

        var busy = ConnectionStateMachine()
        _ = busy.headReceived(keepAlive: true, hasBody: false)
        #expect(busy.shutdownRequested() == ConnectionStateMachine.Action.none)
        #expect(busy.responseSent() == .close)

        var started = ConnectionStateMachine()
        started.bytesReceived()
        #expect(started.shutdownRequested() == ConnectionStateMachine.Action.none)
        #expect(started.headReceived(keepAlive: true, hasBody: false) == .startHandler)
        #expect(!started.keepAlive)
    }
}
