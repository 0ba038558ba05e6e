/// One Server-Sent Event in the WHATWG `text/event-stream` framing. Pure.
struct ServerSentEvent: Equatable {
    var id: UInt64?
    var event: String?
    var data: String
    var retryMilliseconds: Int?

    /// `retry:`, `id:`, `event:` and one `data:` line per line of `data`, then a blank line.
    var encoded: String {
        var out = ""
        if let retryMilliseconds { out += "retry: \(retryMilliseconds)\n" }
        if let id { out += "id: \(id)\n" }
        if let event { out += "event: \(sanitise(event))\n" }
        if !data.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D }) {
            return out + "data: \(data)\n\n"  // One line, nothing to strip: JSON data always.
        }
        for line in data.split(separator: "\n", omittingEmptySubsequences: false) {
            out += "data: \(sanitise(String(line)))\n"
        }
        return out + "\n"
    }

    /// A comment line, ignored by clients; keeps proxies and idle timers from closing the stream.
    static func comment(_ text: String) -> String { ": \(text)\n\n" }

    /// CR would end a field early; a stray one must not split an event.
    private func sanitise(_ s: String) -> String {
        s.utf8.contains(0x0D) ? s.replacingOccurrences(of: "\r", with: "") : s
    }
}
