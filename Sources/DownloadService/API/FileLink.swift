import DownloaderEngine
import Foundation

/// A link to one download's file that opens it without a token for a few minutes:
/// `/downloads/{id}/file?expires=<unix seconds>&signature=<hex>`. What the operator page opens,
/// instead of a link holding the token (`?access_token=`), which a browser keeps with every file it
/// saves: in its download history and in the file's own metadata (Chromium writes the URL, query
/// and all, into `user.xdg.origin.url`, Windows' `Zone.Identifier`, macOS' "where from"). A link
/// names one file and lapses: found later in a history or a file's metadata, it opens nothing.
/// `GET /downloads/{id}/file-link` gives one to a caller who may read that file (its minting
/// stands for the token and for the right to read a private download). The key is a secret no
/// caller holds (derived from the state area's `coalescing.key`, which the replicas of a cluster
/// share, so each checks the others' links) mixed with the service's tokens (changing one voids
/// every link): a caller who shares `--auth-token` with others cannot sign a link to their private
/// downloads. Pure but for the key.
struct FileLink: Sendable {
    /// Seconds a link opens the file.
    static let lifetime: Int64 = 300
    private let key: [UInt8]

    /// `secret`: bytes no caller knows; `tokens`: `--auth-token` and `--admin-token` (nil when not set).
    init(secret: [UInt8], tokens: [String?] = []) {
        key = secret + Array(("\n" + tokens.map { $0 ?? "" }.joined(separator: "\n")).utf8)
    }

    /// A link to `id`'s file, valid from `now` (seconds since 1970) for `lifetime` seconds.
    func path(id: String, now: Double) -> (path: String, expires: Int64) {
        let expires = Int64(now.rounded(.down)) + Self.lifetime
        return ("/downloads/\(id)/file?expires=\(expires)&signature=\(signature(id: id, expires: expires))", expires)
    }

    /// Whether `expires` and `signature` (a request's query values) make a live link to `id`'s file.
    /// One that claims to last longer than links do (a clock far behind at its minting) is not.
    func admits(id: String, expires: String?, signature: String?, now: Double) -> Bool {
        guard let expires, let signature, signature.utf8.count == 64, let at = Int64(expires), at >= 0,
              Double(at) >= now, Double(at) <= now + Double(Self.lifetime) + 60 else { return false }
        return BearerAuth.constantTimeEquals(Array(signature.utf8), Array(self.signature(id: id, expires: at).utf8))
    }

    private func signature(id: String, expires: Int64) -> String {
        HMACSHA256.hex(key: key, message: Array("\(id)\n\(expires)".utf8))
    }
}
