import Foundation

/// The loop side of push-fed bodies (`PushBody`, `PushStream`).
extension Connection {
    /// Starts feeding `stream` once its head is queued.
    func startPush(_ stream: PushStream) {
        push = stream
        producePush(stream)
    }

    /// Asks the source for more when the connection can take it; afterwards, when output is above the
    /// high watermark, the next call comes once it drained below the low one.
    func producePush(_ stream: PushStream) {
        guard !isClosed, push === stream, !stream.isEnded, !stream.producing else { return }
        stream.producing = true
        stream.source.produce(stream)
        stream.producing = false
        if push === stream, !stream.isEnded, writes.isAboveHighWatermark { stream.awaitingDrain = true }
    }

    /// Sends what a push stream queued, unless the socket is known to be full: then the bytes join
    /// the queue and go out on the next `EPOLLOUT` (edge-triggered, always registered), which saves a
    /// send that could only fail with `EAGAIN` on every wake of a reader slower than its source.
    func flushPush() {
        if sendBlocked && !writes.isEmpty { return }
        flush()
    }

    /// The source finished: the body ends after what is queued.
    func finishPush(_ stream: PushStream) {
        guard !isClosed, push === stream, let progress = response, progress.sequence == stream.sequence else { return }
        progress.complete = true
        if stream.chunked {
            writes.append(ResponseHeadEncoder.lastChunk)
        } else if stream.length == nil {
            machine.responseRequiresClose()
        }
        flush()
    }

    /// A push stream to be aborted after its queued output (`abortAfterQueued`) ends once the queue
    /// is empty: everything is with the kernel then, so the connection ends as a refused request's
    /// does (`lingeringClose`: a FIN after those bytes, not a reset that would drop them when the
    /// client had sent more). The access log gives the reason.
    func abortPushIfDrained(_ stream: PushStream) {
        guard let reason = stream.pendingAbort, writes.isEmpty, push === stream, !stream.isEnded else { return }
        stream.markEnded()
        noteAbort(reason)
        lingeringClose()
    }

    /// The connection closed with a push stream still open: its source hears it once.
    func endPushOnClose() {
        guard let stream = push else { return }
        push = nil
        stream.source.ended(stream, completed: false)
    }
}
