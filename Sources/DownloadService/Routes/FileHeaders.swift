import Foundation

/// Header values for serving a stored file. Pure.
enum FileHeaders {
    /// `attachment; filename="…"; filename*=UTF-8''…` (RFC 6266): an ASCII fallback and the exact name.
    static func attachment(fileName: String) -> String {
        let ascii = String(fileName.unicodeScalars.map { s -> Character in
            (s.value >= 0x20 && s.value < 0x7F && s != "\"" && s != "\\") ? Character(s) : "_"
        })
        var allowed = CharacterSet.alphanumerics.intersection(CharacterSet(charactersIn: Unicode.Scalar(0)..<Unicode.Scalar(0x80)))
        allowed.insert(charactersIn: "!#$&+-.^_`|~")
        let encoded = fileName.addingPercentEncoding(withAllowedCharacters: allowed) ?? ascii
        return "attachment; filename=\"\(ascii)\"; filename*=UTF-8''\(encoded)"
    }

    /// `Repr-Digest` (RFC 9530) for a SHA-256 given in hex: `sha-256=:<base64>:`.
    static func reprDigest(sha256Hex hex: String) -> String? {
        guard hex.utf8.count == 64 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        return "sha-256=:\(Data(bytes).base64EncodedString()):"
    }
}
