/// Checks `Authorization: Bearer <token>` (or the token as Basic auth's password) in constant time (no early exit on the first wrong byte).
struct BearerAuth: Sendable {
    private let expected: [UInt8]

    init(token: String) {
        expected = Array(token.utf8)
    }

    /// `Bearer <token>`, or `Basic base64(<any user>:<token>)`.
    func allows(authorization header: String?) -> Bool {
        guard let header else { return false }
        if header.count > 7, header.prefix(7).lowercased() == "bearer " {
            let presented = Array(header.dropFirst(7).trimmingCharacters(in: .whitespaces).utf8)
            return BearerAuth.constantTimeEquals(presented, expected)
        }
        if header.count > 6, header.prefix(6).lowercased() == "basic " {
            guard let decoded = Data(base64Encoded: String(header.dropFirst(6).trimmingCharacters(in: .whitespaces))),
                  let colon = decoded.firstIndex(of: UInt8(ascii: ":")) else { return false }
            return BearerAuth.constantTimeEquals(Array(decoded[decoded.index(after: colon)...]), expected)
        }
        return false
    }

    /// Time depends only on the lengths, never on where the first difference is.
    static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(truncatingIfNeeded: a.count ^ b.count)
        let n = max(a.count, b.count)
        for i in 0..<n {
            let x = i < a.count ? a[i] : 0
            let y = i < b.count ? b[i] : 0
            difference |= x ^ y
        }
        return difference == 0 && a.count == b.count
    }
}

import Foundation
