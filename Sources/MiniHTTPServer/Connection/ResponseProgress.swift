/// Bookkeeping for the response currently being sent on a connection (loop thread only).
/// A class so the hot write path updates counters in place and `Connection.response` is one
/// pointer; each connection reuses one record (`Connection.progressRecord`, `reset`), so a
/// response costs no allocation of its own.
final class ResponseProgress {
    var sequence: UInt64
    var method: String
    var path: String
    var status: Int
    var startedAt: UInt64
    var headBytes: Int
    /// Body bytes the response carries (streams: payload bytes written so far).
    var bodyBytes: Int64
    /// Bytes of head and body that reached the socket.
    var bytesWritten: Int64 = 0
    var isStream: Bool
    /// Stream bodies are chunk-framed (HTTP/1.1) rather than close-delimited.
    var chunked: Bool
    /// Everything the response will send is queued.
    var complete: Bool

    init(sequence: UInt64, method: String, path: String, status: Int, startedAt: UInt64, headBytes: Int,
         bodyBytes: Int64, isStream: Bool, chunked: Bool, complete: Bool) {
        self.sequence = sequence
        self.method = method
        self.path = path
        self.status = status
        self.startedAt = startedAt
        self.headBytes = headBytes
        self.bodyBytes = bodyBytes
        self.isStream = isStream
        self.chunked = chunked
        self.complete = complete
    }

    /// Reinitialises the record for a new response; returns it.
    func reset(sequence: UInt64, method: String, path: String, status: Int, startedAt: UInt64, headBytes: Int,
               bodyBytes: Int64, isStream: Bool, chunked: Bool, complete: Bool) -> ResponseProgress {
        self.sequence = sequence
        self.method = method
        self.path = path
        self.status = status
        self.startedAt = startedAt
        self.headBytes = headBytes
        self.bodyBytes = bodyBytes
        self.bytesWritten = 0
        self.isStream = isStream
        self.chunked = chunked
        self.complete = complete
        return self
    }

    /// Body bytes actually delivered, for the access log.
    var deliveredBodyBytes: Int64 {
        if isStream { return bodyBytes }
        return min(bodyBytes, max(0, bytesWritten - Int64(headBytes)))
    }
}
