/// Bookkeeping for the response currently being sent on a connection.
struct ResponseProgress {
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

    /// Body bytes actually delivered, for the access log.
    var deliveredBodyBytes: Int64 {
        if isStream { return bodyBytes }
        return min(bodyBytes, max(0, bytesWritten - Int64(headBytes)))
    }
}
