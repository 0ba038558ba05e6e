/// One `Range: bytes=…` of a request, before the size is known (RFC 9110 §14.1.2). Pure. Anything
/// else (absent, another unit, several ranges, malformed) asks for the whole body.
enum ByteRangeRequest: Equatable {
    case whole
    /// `a-b`, inclusive.
    case closed(Int64, Int64)
    /// `a-`.
    case from(Int64)
    /// `-n`: the last `n` bytes.
    case suffix(Int64)

    static func parse(_ value: String?) -> ByteRangeRequest {
        guard let value else { return .whole }
        let text = value.trimmingCharacters(in: .whitespaces)
        guard text.count > 6, text.prefix(6).lowercased() == "bytes=" else { return .whole }
        let spec = text.dropFirst(6)
        guard !spec.contains(",") else { return .whole }
        let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return .whole }
        let first = parts[0].trimmingCharacters(in: .whitespaces), last = parts[1].trimmingCharacters(in: .whitespaces)
        func number(_ s: String) -> Int64? {
            guard !s.isEmpty, s.utf8.count <= 18, s.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
            return Int64(s)
        }
        if first.isEmpty { return number(last).map { $0 > 0 ? .suffix($0) : .whole } ?? .whole }
        guard let start = number(first) else { return .whole }
        if last.isEmpty { return .from(start) }
        guard let end = number(last), end >= start else { return .whole }
        return .closed(start, end)
    }
}
