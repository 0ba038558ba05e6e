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
        return seed(from: from, to: to, ranges: [0..<length]).copied.first?.upperBound ?? 0
    }

    /// Copies `ranges` (in file order, disjoint) of `from` into `to` (replaced) at the same offsets,
    /// fsynced. Returns the ranges copied: a range is cut where `from` ends (and those after it
    /// dropped); none when `from` is missing or a read or write failed (`to` then removed). When
    /// nothing was copied for want of a resource that comes back, `lacked`: ENOSPC or EDQUOT (a
    /// full shared volume), EMFILE, ENFILE or ENOMEM, in opening, making or writing a file or in
    /// the sync (the bytes are still in `from`, to be copied later); any other failure copies
    /// nothing, as a source that is missing does.
    static func seed(from: String, to: String, ranges: [Range<Int64>]) -> (copied: [Range<Int64>], lacked: Bool) {
        unlink(to)
        guard !ranges.isEmpty else { return ([], false) }
        let source: Int32
        do throws(SystemError) {
            // A link planted on the shared volume is never followed out of it (ELOOP: nothing copied).
            source = try syscall("open \(from)") { open(from, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }
        } catch {
            return ([], lacking(error.errno))
        }
        defer { close(source) }
        let target: Int32
        do throws(SystemError) {
            // Made as every partial is (`PartialFile`): a file published from it is readable alike.
            target = try syscall("open \(to)") { open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o644) }
        } catch {
            return ([], lacking(error.errno))
        }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var copied: [Range<Int64>] = []
        var failure: Int32?
        for range in ranges where range.lowerBound < range.upperBound {
            let (done, failed) = copyRange(range, source, target, &buffer)
            failure = failed
            if done > range.lowerBound { copied.append(range.lowerBound..<done) }
            guard failed == nil, done == range.upperBound else { break }  // A failure, or the source ended.
        }
        if failure == nil {
            do throws(SystemError) {
                _ = try syscall("fsync") { fsync(target) }
            } catch {
                failure = error.errno
            }
        }
        close(target)
        guard failure == nil, !copied.isEmpty else {
            unlink(to)
            return ([], failure.map(lacking) ?? false)
        }
        return (copied, false)
    }

    /// Whether `errno` says a resource that comes back was lacking (room, descriptors, memory).
    static func lacking(_ errno: Int32) -> Bool {
        [ENOSPC, EDQUOT, EMFILE, ENFILE, ENOMEM].contains(errno)
    }

    /// Copies `range` from `source` to `target` at the same offsets; returns where it stopped (the
    /// range's end, or earlier when the source ended) and the errno of a read or write that failed.
    private static func copyRange(_ range: Range<Int64>, _ source: Int32, _ target: Int32, _ buffer: inout [UInt8]) -> (Int64, Int32?) {
        if let copied = kernelCopy(range, source, target) { return copied }
        var at = range.lowerBound
        while at < range.upperBound {
            let want = Int(min(Int64(buffer.count), range.upperBound - at))
            let read = buffer.withUnsafeMutableBytes { b in
                Result { () throws(SystemError) -> Int in try syscall("pread") { pread(source, b.baseAddress, want, off_t(at)) } }
            }
            let got: Int
            switch read {
            case .success(let n): got = n
            case .failure(let error): return (at, error.errno)
            }
            guard got > 0 else { return (at, nil) }
            let wrote = buffer.withUnsafeBytes { b in
                Result { () throws(SystemError) in try PageCacheWrites.write(target, b.baseAddress!, count: got, at: at) }
            }
            if case .failure(let error) = wrote { return (at, error.errno) }
            at += Int64(got)
        }
        return (at, nil)
    }

    /// `copyRange` by `copy_file_range`; nil when the kernel or the filesystems cannot copy so
    /// (refused at the first call: the caller copies by hand).
    private static func kernelCopy(_ range: Range<Int64>, _ source: Int32, _ target: Int32) -> (Int64, Int32?)? {
        var from = Int64(range.lowerBound)
        var to = Int64(range.lowerBound)
        while from < range.upperBound {
            let want = Int(min(range.upperBound - from, 1 << 30))
            do throws(SystemError) {
                guard try syscall("copy_file_range", { clinux_copy_file_range(source, &from, target, &to, UInt(want)) }) > 0 else {
                    return (from, nil)  // The source ended.
                }
            } catch {
                let unsupported = [EXDEV, ENOSYS, EOPNOTSUPP, EINVAL].contains(error.errno)
                return unsupported && from == range.lowerBound ? nil : (from, error.errno)
            }
        }
        return (from, nil)
    }
}
