/// Bookkeeping for the response currently being sent on a connection (loop thread only).
/// A class so the hot write path updates counters in place and `Connection.response` is one
/// pointer; each connection reuses one record (`Connection.progressRecord`, `reset`), so a
/// response costs no allocation of its own.
final class ResponseProgress {
    var sequence: UInt64 = 0
    var method = ""
    var path = ""
    var status = 0
    var startedAt: UInt64 = 0
    var headBytes = 0
    /// Body bytes the response carries (streams: payload bytes written so far).
    var bodyBytes: Int64 = 0
    /// Bytes of head and body that reached the socket.
    var bytesWritten: Int64 = 0
    var isStream = false
    /// Stream bodies are chunk-framed (HTTP/1.1) rather than close-delimited.
    var chunked = false
    /// Everything the response will send is queued.
    var complete = false
    /// Why the connection closed before the response was all sent (the first reason given).
    var abortReason: String?

    /// An empty record (a connection's reusable one, before its first response).
    init() {}

    convenience init(sequence: UInt64, method: String, path: String, status: Int, startedAt: UInt64, headBytes: Int,
                     bodyBytes: Int64, isStream: Bool, chunked: Bool, complete: Bool) {
        self.init()
        _ = reset(sequence: sequence, method: method, path: path, status: status, startedAt: startedAt,
                  headBytes: headBytes, bodyBytes: bodyBytes, isStream: isStream, chunked: chunked, complete: complete)
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
        self.abortReason = nil
        return self
    }

    /// Body bytes actually delivered, for the access log.
    var deliveredBodyBytes: Int64 {
        if isStream { return bodyBytes }
        return min(bodyBytes, max(0, bytesWritten - Int64(headBytes)))
    }
}
