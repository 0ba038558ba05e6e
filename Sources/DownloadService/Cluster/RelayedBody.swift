import MiniHTTPServer

/// The body of a streamed forwarded answer (`/fetch`): the holder's bytes written to the client as
/// they arrive (`PeerCall` holds a bounded few), never the whole body at once. The client leaving
/// cancels the call, which closes the connection to the holder (whose reader then ends); a body
/// the holder ends short, or a failed transfer, aborts the client's response (a length-framed body
/// that is short is aborted by `PushStream.finish()` too): never a clean end of a truncated body.
final class RelayedBody: PushSource {
    private let call: PeerCall

    init(call: PeerCall) {
        self.call = call
    }

    /// A response dropped unsent (the client left before the handler answered) never hears `ended`.
    deinit {
        call.cancel()
    }

    func produce(_ stream: PushStream) {
        while stream.hasRoom {
            switch call.next(for: stream) {
            case .bytes(let bytes): stream.write(bytes)
            case .finish:
                stream.finish()
                return
            case .abort:
                stream.abort()
                return
            case .wait:
                return
            }
        }
    }

    func ended(_ stream: PushStream, completed: Bool) {
        call.cancel()
    }
}
