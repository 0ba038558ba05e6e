/// Line reading for the test clients' receive buffers.
extension Array where Element == UInt8 {
    /// Removes the first line (up to and including LF; a CR before the LF is dropped too) and returns
    /// it decoded as UTF-8; nil, leaving the buffer as it is, while no LF has arrived.
    mutating func removeFirstLine() -> String? {
        guard let newline = firstIndex(of: 0x0A) else { return nil }
        var line = Array(self[..<newline])
        removeFirst(newline + 1)
        if line.last == 0x0D { line.removeLast() }
        return String(decoding: line, as: UTF8.self)
    }
}
