import Foundation

/// Picks and cleans the stored file's name. Pure.
enum FileNameSanitizer {
    static let fallback = "download"
    /// Longest name in UTF-8 bytes (leaves room for the `<id>-` prefix under NAME_MAX 255).
    static let maxBytes = 200

    /// A safe file name: no path separators, no `..`, no control or format characters (a
    /// right-to-left override would show `gnp.exe` as `exe.png`), no leading dots, bounded length;
    /// `download` when nothing usable is left.
    static func sanitize(_ raw: String) -> String {
        var scalars = String.UnicodeScalarView()
        for s in raw.unicodeScalars {
            if s.properties.generalCategory == .format { continue }  // bidi controls, zero-width marks
            switch s.value {
            case 0..<0x20, 0x7f, 0x80..<0xa0: continue  // control characters
            case 0x2f, 0x5c: scalars.append("_")        // '/' and '\'
            default:
                if s == ":" || s == "*" || s == "?" || s == "\"" || s == "<" || s == ">" || s == "|" {
                    scalars.append("_")
                } else {
                    scalars.append(s)
                }
            }
        }
        var name = String(scalars)
        while name.contains("..") { name = name.replacingOccurrences(of: "..", with: ".") }
        if name.utf8.count > maxBytes { name = truncate(name) }
        // No leading dot once the blanks are gone either (". .bashrc" is no `.bashrc`).
        while let first = name.unicodeScalars.first, first == "." || first.properties.isWhitespace {
            name.unicodeScalars.removeFirst()
        }
        name = name.trimmingCharacters(in: .whitespaces)
        return name.isEmpty ? fallback : name
    }

    /// At most `maxBytes` UTF-8 bytes, keeping an extension of at most 16 bytes.
    private static func truncate(_ name: String) -> String {
        var ext = String.UnicodeScalarView()
        if let dot = name.unicodeScalars.lastIndex(of: "."), name.unicodeScalars[dot...].reduce(0, { $0 + $1.utf8.count }) <= 16 {
            ext = String.UnicodeScalarView(name.unicodeScalars[dot...])
        }
        var stem = String.UnicodeScalarView(name.unicodeScalars.dropLast(ext.count))
        let extBytes = ext.reduce(0) { $0 + $1.utf8.count }
        var stemBytes = stem.reduce(0) { $0 + $1.utf8.count }
        while stemBytes + extBytes > maxBytes, let last = stem.popLast() { stemBytes -= last.utf8.count }
        return String(stem) + String(ext)
    }

    /// The name from `Content-Disposition` (`filename*` preferred, then `filename`), else the URL's
    /// last path segment (percent-decoded), sanitised.
    static func fileName(contentDisposition: String?, url: String) -> String {
        if let header = contentDisposition, let name = ContentDisposition.fileName(header), !name.isEmpty {
            return sanitize(name)
        }
        return sanitize(lastPathSegment(url))
    }

    /// The name a download of `url` takes from its origin's `head`: `Content-Disposition`, else the
    /// requested URL's last segment, else (a redirect to a named file) the effective URL's.
    static func fileName(of head: ResponseHead, url: String) -> String {
        let disposition = head.value("content-disposition")
        let name = fileName(contentDisposition: disposition, url: url)
        guard name == fallback, disposition == nil else { return name }
        return fileName(contentDisposition: nil, url: head.effectiveURL)
    }

    static func lastPathSegment(_ url: String) -> String {
        var path = url
        if let schemeEnd = path.range(of: "://") { path = String(path[schemeEnd.upperBound...]) }
        if let q = path.firstIndex(where: { $0 == "?" || $0 == "#" }) { path = String(path[..<q]) }
        guard let slash = path.firstIndex(of: "/") else { return "" }
        let segment = path[slash...].split(separator: "/").last.map(String.init) ?? ""
        return segment.removingPercentEncoding ?? segment
    }
}

/// Extracts the file name from a `Content-Disposition` header (RFC 6266, RFC 8187). Pure.
enum ContentDisposition {
    static func fileName(_ header: String) -> String? {
        var plain: String?
        var extended: String?
        for param in parameters(header) {
            switch param.name {
            case "filename*": extended = decodeExtended(param.value)
            case "filename": plain = param.value
            default: break
            }
        }
        return extended ?? plain
    }

    /// `;`-separated `name=value` pairs after the disposition type; quoted strings unescaped.
    static func parameters(_ header: String) -> [(name: String, value: String)] {
        var result: [(String, String)] = []
        var chars = Array(header.unicodeScalars)[...]
        // Skip the disposition type.
        while let c = chars.first, c != ";" { chars.removeFirst() }
        while !chars.isEmpty {
            chars.removeFirst()  // ';'
            while let c = chars.first, c == " " || c == "\t" { chars.removeFirst() }
            var name = ""
            while let c = chars.first, c != "=", c != ";" { name.unicodeScalars.append(c); chars.removeFirst() }
            guard chars.first == "=" else { continue }
            chars.removeFirst()
            var value = ""
            if chars.first == "\"" {
                chars.removeFirst()
                while let c = chars.first, c != "\"" {
                    chars.removeFirst()
                    if c == "\\", let next = chars.first { value.unicodeScalars.append(next); chars.removeFirst() } else { value.unicodeScalars.append(c) }
                }
                if !chars.isEmpty { chars.removeFirst() }
                while let c = chars.first, c != ";" { chars.removeFirst() }
            } else {
                while let c = chars.first, c != ";" { value.unicodeScalars.append(c); chars.removeFirst() }
            }
            result.append((name.trimmingCharacters(in: .whitespaces).lowercased(), value.trimmingCharacters(in: .whitespaces)))
        }
        return result
    }

    /// `UTF-8''%e2%82%ac%20rates.txt` → `€ rates.txt` (UTF-8 and ISO-8859-1 only).
    static func decodeExtended(_ value: String) -> String? {
        let parts = value.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        let charset = parts[0].lowercased()
        let encoded = String(parts[2])
        var bytes: [UInt8] = []
        var it = Array(encoded.utf8)[...]
        while let b = it.first {
            it.removeFirst()
            if b == UInt8(ascii: "%"), it.count >= 2, let v = UInt8(String(decoding: it.prefix(2), as: UTF8.self), radix: 16) {
                bytes.append(v)
                it.removeFirst(2)
            } else {
                bytes.append(b)
            }
        }
        switch charset {
        case "utf-8": return String(validating: bytes, as: UTF8.self)
        case "iso-8859-1": return String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) }))
        default: return nil
        }
    }
}
