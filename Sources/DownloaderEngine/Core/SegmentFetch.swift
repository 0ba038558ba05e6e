import Basics
import Foundation
import Glibc

/// One ranged request of a segmented attempt: `Range: bytes=first-last` with `If-Range`, its body
/// written in place (pwrite at the segment's next byte) on the transfer thread. Its head is judged
/// by `SegmentPlanner.judgeSegment`; what it means for the attempt is the crew's to decide.
final class SegmentFetch: TransferDelegate, BodySink, @unchecked Sendable {
    let index: Int
    let first: Int64
    let last: Int64
    private weak var crew: SegmentCrew?
    private let fd: Int32
    /// The next file offset to write (transfer thread).
    private var next: Int64

    init(index: Int, first: Int64, last: Int64, crew: SegmentCrew, fd: Int32) {
        self.index = index
        self.first = first
        self.last = last
        self.crew = crew
        self.fd = fd
        next = first
    }

    /// The request for this range: the attempt's own, with the range and the validator.
    static func request(from template: TransferRequest, first: Int64, last: Int64, validator: Validator) -> TransferRequest {
        var request = template
        request.headers = template.headers.filter { $0.name.lowercased() != "range" && $0.name.lowercased() != "if-range" }
        request.headers.append(("Range", "bytes=\(first)-\(last)"))
        request.headers.append(("If-Range", validator.ifRange ?? ""))
        request.maxBodyBytes = last - first + 1
        return request
    }

    func transfer(didReceive head: ResponseHead) -> Result<BodySink, TransferFailure> {
        guard let crew else { return .failure(TransferFailure(.rejected, "the attempt is gone")) }
        let verdict = SegmentPlanner.judgeSegment(head, first: first, last: last, total: crew.total, validator: crew.validator)
        switch verdict {
        case .accept:
            return .success(self)
        case .abandon(let reason):
            crew.abandon(reason)
            return .failure(TransferFailure(.rejected, reason))
        case .retry(let status):
            return .failure(TransferFailure(.connection, "a segment got HTTP \(status)"))
        case .fail(let status):
            crew.refuse(status: status)
            return .failure(TransferFailure(.rejected, "a segment got HTTP \(status)"))
        }
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        try crew?.checkWrite()
        guard next + Int64(bytes.count) <= last + 1 else {
            throw SystemError(errno: EINVAL, function: "pwrite (past the segment's end)")
        }
        var done = 0
        while done < bytes.count {
            let n = try syscall("pwrite") { pwrite(fd, base + done, bytes.count - done, off_t(next + Int64(done))) }
            done += n
        }
        next += Int64(bytes.count)
        crew?.fetchWrote(index, count: Int64(bytes.count), next: next)
    }

    func transfer(didFinishWith result: Result<TransferSummary, TransferFailure>) {
        crew?.fetchEnded(self, result)
    }
}
