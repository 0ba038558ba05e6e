/// Evaluates a `Range` header against a representation of known size (RFC 9110 §14).
enum RangeHeader {
    enum Outcome: Equatable {
        /// No usable range: absent, malformed, not bytes, or several ranges (served as a full 200).
        case full
        /// One satisfiable range, inclusive bounds.
        case partial(start: Int64, end: Int64)
        /// One syntactically valid range outside the representation: 416.
        case unsatisfiable
    }

    static func evaluate(_ value: String?, size: Int64) -> Outcome {
        guard let value else { return .full }
        let trimmed = Substring(value).trimmingSpaces()
        guard trimmed.count > 6, trimmed.prefix(6).lowercased() == "bytes=" else { return .full }
        let spec = trimmed.dropFirst(6)
        if spec.contains(",") { return .full }
        let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return .full }
        let first = parts[0].trimmingSpaces(), last = parts[1].trimmingSpaces()
        func number(_ s: String) -> Int64? {
            guard !s.isEmpty, s.utf8.count <= 18, s.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
            return Int64(s)
        }
        if first.isEmpty {
            guard let suffix = number(last) else { return .full }
            if suffix == 0 { return .unsatisfiable }
            // The one satisfiable range of an empty representation (RFC 9110 §14.1.1), with no
            // byte to put in a 206: the whole (empty) body.
            if size == 0 { return .full }
            return .partial(start: max(0, size - suffix), end: size - 1)
        }
        guard let start = number(first) else { return .full }
        if last.isEmpty {
            return start < size ? .partial(start: start, end: size - 1) : .unsatisfiable
        }
        guard let end = number(last), end >= start else { return .full }
        return start < size ? .partial(start: start, end: min(end, size - 1)) : .unsatisfiable
    }
}
