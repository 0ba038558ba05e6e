import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// Start-up's one-pass view of a storage area: which stored files exist, and which are orphans.
@Suite struct AreaListingTests {
    @Test func claimsRegularFilesByIdAndNameAndSweepsTheRest() throws {
        let dir = EngineFixture.root().path
        let a = "0123456789abcdef", b = "fedcba9876543210", c = "00000000000000aa"
        for name in ["\(a)-one.bin", "\(a)-older.bin", "\(b)-two.bin", "notours.txt", "0123-short"] {
            try Data([1]).write(to: URL(fileURLWithPath: dir + "/" + name))
        }
        #expect(symlink(dir + "/\(b)-two.bin", dir + "/\(c)-link.bin") == 0)
        var listing = AreaListing(dir)
        #expect(listing.claim(dir + "/\(a)-one.bin", of: a) == true)
        #expect(listing.claim(dir + "/\(a)-gone.bin", of: a) == false)
        #expect(listing.claim(dir + "/\(c)-link.bin", of: c) == false, "a symlink is not a stored file")
        #expect(listing.claim("/elsewhere/\(b)-two.bin", of: b) == nil, "not in this area: the caller stats it")
        #expect(listing.claim(dir + "/sub/\(b)-two.bin", of: b) == nil)
        listing.removeUnclaimed()
        let left = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
        #expect(left == ["\(a)-one.bin", "0123-short", "notours.txt"].sorted())
        var missing = AreaListing("/nonexistent-\(UUID().uuidString)")
        #expect(missing.claim("/x/\(a)-y", of: a) == nil)
    }
}
