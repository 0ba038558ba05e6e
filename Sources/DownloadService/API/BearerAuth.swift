/// Checks `Authorization: Bearer <token>` in constant time (no early exit on the first wrong byte).
struct BearerAuth: Sendable {
    private let expected: [UInt8]

    init(token: String) {
        expected = Array(token.utf8)
    }

    func allows(authorization header: String?) -> Bool {
        guard let header else { return false }
        let scheme = "bearer "
        guard header.count > scheme.count, header.prefix(scheme.count).lowercased() == scheme else { return false }
        let presented = Array(header.dropFirst(scheme.count).trimmingCharacters(in: .whitespaces).utf8)
        return BearerAuth.constantTimeEquals(presented, expected)
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
