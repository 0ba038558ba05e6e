import Basics
import CLinux
import Foundation

/// Output: non-blocking sends and sendfile from the queue, completion of a response.
extension Connection {
    /// Writes as much queued output as the socket takes without blocking.
    func flush() {
        guard !isClosed else { return }
        var progressed = false
        drain: while let item = writes.first {
            let result: IOResult<Int>
            do {
                switch item {
                case .bytes(let bytes, let offset):
                    result = try bytes.withUnsafeBytes { try Socket.send(fd, UnsafeRawBufferPointer(rebasing: $0[offset...])) }
                case .file(let file, let offset, let end):
                    result = try sendFileRange(file, offset, end)
                case .sharedFile(let file, let offset, let end):
                    result = try sendFileRange(file.fd, offset, end)
                }
                if case .processed(0) = result {
                    close(because: "sendfile found the end of the file before the range's end (the file shrank)")
                    return
                }
            } catch {
                close(because: "send failed: \(error)")
                return
            }
            switch result {
            case .wouldBlock:
                sendBlocked = true
                break drain
            case .processed(let n):
                writes.advance(by: n)
                response?.bytesWritten += Int64(n)
                progressed = true
            }
        }
        if progressed { lastProgressAt = loop.now }
        afterWrite()
    }

    private func sendFileRange(_ file: Int32, _ offset: off_t, _ end: off_t) throws(SystemError) -> IOResult<Int> {
        var position = offset
        return try Socket.sendfile(fd, file: file, offset: &position, count: Int(min(end - offset, 1 << 30)))
    }

    /// Sends `bytes` straight away when nothing is queued (the common case: no queue churn),
    /// queueing whatever the socket does not take.
    func writeNow(_ bytes: [UInt8]) {
        guard writes.isEmpty, !isClosed else {
            writes.append(bytes)
            flush()
            return
        }
        guard let sent = bytes.withUnsafeBytes({ sendImmediately($0) }) else { return }
        if sent < bytes.count { writes.append(sent == 0 ? bytes : Array(bytes[sent...])) }
        afterWrite()
    }

    /// Like `writeNow(_: [UInt8])` for bytes in borrowed memory (the loop's write buffer): what the
    /// socket does not take is copied into the queue before anything else can reuse that memory.
    func writeNow(_ bytes: UnsafeRawBufferPointer) {
        guard writes.isEmpty, !isClosed else {
            writes.append(Array(bytes))
            flush()
            return
        }
        guard let sent = sendImmediately(bytes) else { return }
        if sent < bytes.count { writes.append(Array(bytes[sent...])) }
        afterWrite()
    }

    /// One `send` of `bytes` with nothing queued before them: the count the socket took (0 when it
    /// would block), or nil when the connection failed and was closed.
    private func sendImmediately(_ bytes: UnsafeRawBufferPointer) -> Int? {
        let result: IOResult<Int>
        do {
            result = try Socket.send(fd, bytes)
        } catch {
            close(because: "send failed: \(error)")
            return nil
        }
        guard case .processed(let n) = result else { return 0 }
        response?.bytesWritten += Int64(n)
        lastProgressAt = loop.now
        return n
    }

    /// Bookkeeping after output progressed: wake a suspended stream writer, finish the response.
    func afterWrite() {
        if let waiter = streamWaiter, writes.isBelowLowWatermark {
            streamWaiter = nil
            waiter.resume()
        }
        if let push, push.awaitingDrain, writes.isBelowLowWatermark {
            push.awaitingDrain = false
            producePush(push)
        }
        if let push { abortPushIfDrained(push) }
        if isClosed { return }
        if writes.isEmpty, response?.complete == true {
            finishResponse()
            return
        }
        updateDeadline()
    }

    /// The whole response was written: log it, then read the next request or close.
    func finishResponse() {
        guard let progress = response else { return }
        response = nil
        logAccess(progress)
        if let push, push.sequence == progress.sequence {
            self.push = nil
            push.source.ended(push, completed: true)
        }
        switch machine.responseSent() {
        case .resumeReading:
            headStartedAt = loop.now
            current = nil
            if home != nil && !isProcessing && returnHome() { return }
            if isProcessing { return }  // the parsing loop below us continues with the next request
            processInbound()
            if !isClosed && machine.wantsToRead { readAndProcess() }
            updateDeadline()
        default:
            lingeringClose()
        }
    }
}
