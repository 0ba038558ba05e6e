/// The `ResponseBodyWriter` handed to a stream closure. Writes go to the connection's queue on its
/// loop; the writer suspends while the queue is above the high watermark.
struct StreamBodyWriter: ResponseBodyWriter {
    let connection: Connection
    let sequence: UInt64

    func write(_ bytes: [UInt8]) async throws {
        if Task.isCancelled { throw CancellationError() }
        guard !bytes.isEmpty else { return }
        let connection = self.connection, sequence = self.sequence
        if connection.loop.inEventLoop {
            switch connection.streamWrite(bytes, sequence: sequence) {
            case .written: return
            case .closed: throw ConnectionClosedError()
            case .mustWait:
                try await withCheckedThrowingContinuation { connection.waitForDrain($0) }
            }
        } else {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                connection.loop.execute {
                    switch connection.streamWrite(bytes, sequence: sequence) {
                    case .written: continuation.resume()
                    case .closed: continuation.resume(throwing: ConnectionClosedError())
                    case .mustWait: connection.waitForDrain(continuation)
                    }
                }
            }
        }
    }
}

extension Connection {
    enum StreamWriteResult {
        case written, mustWait, closed
    }

    /// Queues one chunk of stream `sequence` and flushes it (loop thread).
    func streamWrite(_ bytes: [UInt8], sequence: UInt64) -> StreamWriteResult {
        guard !isClosed, let progress = response, progress.sequence == sequence, progress.isStream,
              !progress.complete else { return .closed }
        writes.append(progress.chunked ? ResponseHeadEncoder.chunk(bytes) : bytes)
        response?.bodyBytes += Int64(bytes.count)
        flush()
        if isClosed { return .closed }
        return writes.isAboveHighWatermark ? .mustWait : .written
    }

    /// Resumes `continuation` once pending output falls to the low watermark (loop thread).
    func waitForDrain(_ continuation: CheckedContinuation<Void, Error>) {
        if isClosed {
            continuation.resume(throwing: ConnectionClosedError())
        } else if writes.isBelowLowWatermark {
            continuation.resume()
        } else {
            streamWaiter?.resume(throwing: ConnectionClosedError())
            streamWaiter = continuation
        }
    }
}

extension EventLoop {
    /// Continues on the loop thread (a task preferring this loop resumes here). Callers check
    /// `inEventLoop` first: an async call costs an executor switch even when nothing needs to move.
    func hop() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            execute { continuation.resume() }
        }
    }
}
