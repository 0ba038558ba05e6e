import Foundation

/// A line-based reader for the parts of `openapi.yaml` that tests check (the repo has no YAML
/// dependency): block mappings found by indentation, their keys, and sequences of scalars (block
/// `- item` lines or a flow `[a, b]`). Comments, blank lines and block-scalar text are skipped.
struct OpenAPIOutline {
    private struct Line {
        var indent: Int
        var text: Substring
    }

    private let lines: [Line]

    init(_ text: String) {
        lines = text.split(separator: "\n", omittingEmptySubsequences: false).compactMap { raw in
            let text = raw.drop(while: { $0 == " " })
            guard !text.isEmpty, !text.hasPrefix("#") else { return nil }
            return Line(indent: raw.count - text.count, text: text)
        }
    }

    /// `openapi.yaml` at the package root.
    static func repositoryDocument() throws -> OpenAPIOutline {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        return OpenAPIOutline(try String(contentsOf: root.appendingPathComponent("openapi.yaml"), encoding: .utf8))
    }

    /// The scalars of the sequence at `path` (e.g. `["components", "schemas", "Failure", "properties",
    /// "code", "enum"]`); nil when the path is missing or holds no sequence.
    func sequence(at path: [String]) -> [String]? {
        guard let (index, end) = locate(path) else { return nil }
        let inline = Self.inlineValue(of: lines[index].text)
        if inline.hasPrefix("[") && inline.hasSuffix("]") {
            return inline.dropFirst().dropLast().split(separator: ",").map { Self.scalar($0) }
        }
        guard inline.isEmpty, index + 1 < end else { return nil }
        let items = lines[(index + 1)..<end].filter { $0.indent == lines[index + 1].indent }
        guard items.allSatisfy({ $0.text.hasPrefix("- ") }) else { return nil }
        return items.map { Self.scalar($0.text.dropFirst(2)) }
    }

    /// The keys of the mapping at `path` (e.g. the statuses of an operation's `responses`).
    func keys(at path: [String]) -> [String]? {
        guard let (index, end) = locate(path), index + 1 < end else { return nil }
        let childIndent = lines[index + 1].indent
        return lines[(index + 1)..<end].filter { $0.indent == childIndent }.compactMap { Self.key(of: $0.text) }
    }

    /// The inline value of the key at `path` ("" when a block follows), e.g. `{ $ref: "…" }`.
    func value(at path: [String]) -> String? {
        locate(path).map { String(Self.inlineValue(of: lines[$0.0].text)) }
    }

    /// The line index of the key at the end of `path` and the end of its block.
    private func locate(_ path: [String]) -> (Int, Int)? {
        var start = 0
        var end = lines.count
        var parentIndent = -1
        var found: Int?
        for name in path {
            guard start < end else { return nil }
            let childIndent = lines[start].indent
            guard childIndent > parentIndent,
                  let index = (start..<end).first(where: { lines[$0].indent == childIndent && Self.key(of: lines[$0].text) == name })
            else { return nil }
            found = index
            parentIndent = childIndent
            start = index + 1
            end = (start..<end).first(where: { lines[$0].indent <= childIndent }) ?? end
        }
        return found.map { ($0, end) }
    }

    /// The key of a `key: value` line (quotes removed); nil for a sequence item or a plain line.
    private static func key(of text: Substring) -> String? { split(text).map { scalar($0.key) } }

    /// The value after the key, "" when there is none (a block follows).
    private static func inlineValue(of text: Substring) -> Substring {
        split(text)?.value.drop(while: { $0 == " " }) ?? ""
    }

    /// `key: value` split at the first colon that ends the line or is followed by a space.
    private static func split(_ text: Substring) -> (key: Substring, value: Substring)? {
        guard !text.hasPrefix("- ") else { return nil }
        var index = text.startIndex
        while let colon = text[index...].firstIndex(of: ":") {
            let after = text.index(after: colon)
            if after == text.endIndex || text[after] == " " { return (text[..<colon], text[after...]) }
            index = after
        }
        return nil
    }

    private static func scalar(_ text: Substring) -> String {
        var s = text.trimmingCharacters(in: .whitespaces)
        if s.count >= 2, let first = s.first, first == "\"" || first == "'", s.last == first {
            s = String(s.dropFirst().dropLast())
        }
        return s
    }
}
