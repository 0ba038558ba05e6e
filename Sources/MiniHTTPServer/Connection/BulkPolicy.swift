/// Which responses leave the loop that answered the request for a *bulk* loop
/// (`ServerConfiguration.bulkLoopCount`): long bodies made of bytes produced elsewhere (a push
/// stream, a file sent with sendfile), which may run at a lower priority than the loops that
/// accept, parse and answer short requests. Pure: the connection acts on the decision.
enum BulkPolicy {
    /// The shape of a response body as far as the decision goes.
    enum Shape: Equatable {
        /// Bytes in memory (`.empty`, `.bytes`): written at once, never moved.
        case inMemory
        /// A file range of this many bytes, sent with sendfile.
        case file(bytes: Int64)
        /// A push-fed body that will be fed (not HEAD, not bodiless); `length` when framed by length.
        case push(length: Int64?)
        /// A stream closure: it runs on the answering loop's handler task, so it stays there.
        case closure
    }

    /// Whether a response of `shape` moves to a bulk loop: files and length-framed push bodies of at
    /// least `minimumBytes`, push bodies of unknown length (event streams, growing files). Nothing
    /// moves when there is no bulk loop, for HEAD, or when output is still queued (the connection
    /// must move with an empty queue: one loop owns a queue and its file descriptors).
    static func moves(_ shape: Shape, isHead: Bool, minimumBytes: Int64, bulkLoops: Int, outputQueued: Bool) -> Bool {
        guard bulkLoops > 0, !isHead, !outputQueued else { return false }
        switch shape {
        case .inMemory, .closure: return false
        case .file(let bytes): return bytes >= minimumBytes
        case .push(let length?): return length >= minimumBytes
        case .push(nil): return true
        }
    }
}
