import Basics
import CLinux
import Foundation
import Glibc

/// Seeds a new epoch's partial from the previous epoch's (`EpochFiles.Seed`): the durable byte
/// ranges are copied to the same offsets (a segmented download's gaps stay holes, written later by
/// the segments that resume there), then the file is fsynced. The kernel copies
/// (`copy_file_range`: no pass through this process, and a clone or a server-side copy where the
/// shared filesystem offers one); by hand where it cannot.
enum EpochSeeding {
    /// Copies the first `length` bytes of `from` into `to` (replaced), fsynced. Returns the bytes
    /// copied: fewer when `from` is shorter, 0 when it is missing or unreadable (`to` then removed).
    static func copy(from: String, to: String, length: Int64) -> Int64 {
        guard length > 0 else {
            unlink(to)
            return 0
        }
        return copy(from: from, to: to, ranges: [0..<length]).first?.upperBound ?? 0
    }

    /// Copies `ranges` (in file order, disjoint) of `from` into `to` (replaced) at the same offsets,
    /// fsynced. Returns the ranges copied: a range is cut where `from` ends (and those after it
    /// dropped); none when `from` is missing or a read or write failed (`to` then removed).
    static func copy(from: String, to: String, ranges: [Range<Int64>]) -> [Range<Int64>] {
        seed(from: from, to: to, ranges: ranges).copied
    }

    /// `copy(from:to:ranges:)`, telling a failure (`failed`: the target could not be made, a read,
    /// a write or the sync failed, or the source could not be opened for another reason than being
    /// gone) from a source that is simply missing or shorter (nothing to keep: not a failure).
    static func seed(from: String, to: String, ranges: [Range<Int64>]) -> (copied: [Range<Int64>], failed: Bool) {
        unlink(to)
        guard !ranges.isEmpty else { return ([], false) }
        let source: Int32
        do throws(SystemError) {
            source = try syscall("open \(from)") { open(from, O_RDONLY | O_CLOEXEC) }
        } catch {
            return ([], error.errno != ENOENT)
        }
        defer { close(source) }
        guard let target = try? syscall("open \(to)", { open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600) }) else {
            return ([], true)
        }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var copied: [Range<Int64>] = []
        var ok = true
        for range in ranges where range.lowerBound < range.upperBound {
            let (done, failed) = copyRange(range, source, target, &buffer)
            ok = !failed
            if done > range.lowerBound { copied.append(range.lowerBound..<done) }
            guard ok, done == range.upperBound else { break }  // A failure, or the source ended.
        }
        if ok { ok = (try? syscall("fsync") { fsync(target) }) != nil }
        close(target)
        guard ok, !copied.isEmpty else {
            unlink(to)
            return ([], !ok)
        }
        return (copied, false)
    }

    /// Copies `range` from `source` to `target` at the same offsets; returns where it stopped (the
    /// range's end, or earlier when the source ended) and whether a read or write failed.
    private static func copyRange(_ range: Range<Int64>, _ source: Int32, _ target: Int32, _ buffer: inout [UInt8]) -> (Int64, Bool) {
        if let copied = kernelCopy(range, source, target) { return copied }
        var at = range.lowerBound
        while at < range.upperBound {
            let want = Int(min(Int64(buffer.count), range.upperBound - at))
            let got = (try? buffer.withUnsafeMutableBytes { b in try syscall("pread") { pread(source, b.baseAddress, want, off_t(at)) } }) ?? -1
            guard got > 0 else { return (at, got < 0) }
            var written = 0
            while written < got {
                let n = (try? buffer.withUnsafeBytes { b in
                    try syscall("pwrite") { pwrite(target, b.baseAddress! + written, got - written, off_t(at + Int64(written))) }
                }) ?? -1
                guard n > 0 else { return (at, true) }
                written += n
            }
            at += Int64(got)
        }
        return (at, false)
    }

    /// `copyRange` by `copy_file_range`; nil when the kernel or the filesystems cannot copy so
    /// (refused at the first call: the caller copies by hand).
    private static func kernelCopy(_ range: Range<Int64>, _ source: Int32, _ target: Int32) -> (Int64, Bool)? {
        var from = Int64(range.lowerBound)
        var to = Int64(range.lowerBound)
        while from < range.upperBound {
            let want = Int(min(range.upperBound - from, 1 << 30))
            do throws(SystemError) {
                guard try syscall("copy_file_range", { clinux_copy_file_range(source, &from, target, &to, UInt(want)) }) > 0 else {
                    return (from, false)  // The source ended.
                }
            } catch {
                let unsupported = [EXDEV, ENOSYS, EOPNOTSUPP, EINVAL].contains(error.errno)
                return unsupported && from == range.lowerBound ? nil : (from, true)
            }
        }
        return (from, false)
    }
}
