import Basics
import Foundation

/// What identifies one version of the origin's file, taken from the final hop's response.
struct Validator: Sendable, Codable, Equatable {
    /// A strong entity tag, quotes included (never `W/`).
    var etag: String?
    /// A strong `Last-Modified` date (only used when the origin sent no ETag at all).
    var lastModified: String?

    /// The `If-Range` value: the ETag, else the Last-Modified date.
    var ifRange: String? { etag ?? lastModified }
}

/// Pure decisions about resuming: what to ask for, which validator a response carries, and what a
/// response means for the bytes already kept (RFC 9110 §13.1.5, §14.4, §8.8.2.2).
enum ResumePlan {
    /// The request side of one attempt.
    struct Request: Equatable {
        /// Bytes kept from before; the body will be appended here (0: start over).
        var offset: Int64
        /// True when kept bytes must be thrown away (no usable validator).
        var discardsKeptBytes: Bool
        var headers: [HeaderField]
    }

    struct HeaderField: Equatable {
        var name: String
        var value: String
    }

    /// `Range: bytes=N-` with `If-Range` when `kept > 0` and a validator is known; otherwise a plain GET.
    static func request(kept: Int64, validator: Validator?) -> Request {
        guard kept > 0 else { return Request(offset: 0, discardsKeptBytes: false, headers: []) }
        guard let ifRange = validator?.ifRange else {
            return Request(offset: 0, discardsKeptBytes: true, headers: [])
        }
        return Request(offset: kept, discardsKeptBytes: false, headers: [
            HeaderField(name: "Range", value: "bytes=\(kept)-"),
            HeaderField(name: "If-Range", value: ifRange),
        ])
    }

    /// The validator a response offers: a strong ETag; or, only when there is no ETag at all, a
    /// Last-Modified at least one second older than the response's Date. Weak ETag → nil, and so
    /// is one that is not an entity tag (RFC 9110 §8.8.3: a space or a `"` inside): it would be
    /// echoed to clients as the service's own strong `ETag`, a header they cannot parse. So is
    /// one holding a comma: valid, but the lists of `If-Match`/`If-None-Match` (`ETagList`) would
    /// split it, and no client's condition would ever match it.
    /// A body in a content coding the service did not ask for (it sends no `Accept-Encoding`) has
    /// none: its ranges count coded bytes, and a server may answer a resume in another coding under
    /// the same tag. It is stored as sent, and fetched again whole rather than resumed.
    static func validator(of head: ResponseHead) -> Validator? {
        if coding(of: head) != nil { return nil }
        if let etag = head.value("etag")?.trimmingCharacters(in: .whitespaces) {
            guard !etag.hasPrefix("W/"), etag.utf8.count >= 2, etag.hasPrefix("\""), etag.hasSuffix("\""),
                  etag.utf8.dropFirst().dropLast().allSatisfy({ $0 == 0x21 || ((0x23...0x7E).contains($0) && $0 != 0x2C) || $0 >= 0x80 })
            else { return nil }
            return Validator(etag: etag, lastModified: nil)
        }
        guard let lastModifiedText = head.value("last-modified")?.trimmingCharacters(in: .whitespaces),
              let lastModified = HTTPDate.parse(lastModifiedText),
              let dateText = head.value("date"), let date = HTTPDate.parse(dateText),
              date.timeIntervalSince(lastModified) >= 1
        else { return nil }
        return Validator(etag: nil, lastModified: lastModifiedText)
    }

    /// What a response head means for this attempt.
    enum Decision: Equatable {
        /// Write the body at `offset` (0 for a full body). `restarted`: kept bytes are discarded.
        /// A `200` accepted at an `offset` above 0 is the whole file again, of the kept bytes'
        /// version: its first `offset` bytes are the kept ones (`KeptBytesSkip`), the rest goes on.
        case accept(offset: Int64, restarted: Bool, total: Int64?)
        /// Unusable partial answer: discard the kept bytes and try again from 0.
        case restartNextAttempt(reason: String)
        /// A transient HTTP answer (5xx, 408, 429): retry, honouring `Retry-After`.
        case retry(status: Int, retryAfter: String?)
        /// A final HTTP answer: fail without storing anything.
        case fail(status: Int)
    }

    /// Judges `head` for an attempt that asked for `requested`; `knownTotal` is the total size seen
    /// before (from an earlier attempt), `sentValidator` what went into `If-Range`.
    static func decide(head: ResponseHead, requested: Request, sentValidator: Validator?, knownTotal: Int64?) -> Decision {
        let status = head.status
        switch status {
        case 200, 203:
            let length = head.contentLength
            if status == 200, repeatsKeptVersion(head, requested: requested, sentValidator: sentValidator, knownTotal: knownTotal) {
                return .accept(offset: requested.offset, restarted: false, total: length)
            }
            return .accept(offset: 0, restarted: requested.offset > 0 || requested.discardsKeptBytes, total: length)
        case 206:
            guard let range = ContentRange.parse(head.value("content-range") ?? "") else {
                return .restartNextAttempt(reason: "206 without a usable Content-Range")
            }
            guard range.agrees(withLengthOf: head) else {
                return .restartNextAttempt(reason: "206 whose Content-Length is not the length of its Content-Range")
            }
            if range.first == 0 {
                // A body from 0 in 206 form, whatever was asked: a fresh start, as a 200 is. Short
                // of the end (an origin that caps every answer, a plain GET included), the rest is
                // asked for next, as after any capped range.
                return .accept(offset: 0, restarted: requested.offset > 0 || requested.discardsKeptBytes, total: range.total)
            }
            if let coding = coding(of: head) {
                return .restartNextAttempt(reason: "206 in a content coding (\(coding)), not the bytes kept")
            }
            guard requested.offset > 0, range.first == requested.offset else {
                return .restartNextAttempt(reason: "206 starting at \(range.first), expected \(requested.offset)")
            }
            if let known = knownTotal, let total = range.total, known != total {
                return .restartNextAttempt(reason: "the total size changed from \(known) to \(total)")
            }
            // `bytes N-M/*`: the size known from an earlier answer stays known.
            let total = range.total ?? knownTotal
            if let total, range.last >= total {
                return .restartNextAttempt(reason: "206 with a Content-Range beyond the end (\(total) bytes)")
            }
            if let sent = sentValidator, let offered = rawValidator(head) {
                if let etag = sent.etag, offered.etag != nil, offered.etag != etag {
                    return .restartNextAttempt(reason: "206 for a different ETag")
                }
                if let lm = sent.lastModified, let seen = offered.lastModified, seen != lm {
                    return .restartNextAttempt(reason: "206 for a different Last-Modified")
                }
            }
            // A range short of the end (an origin that caps the length of its answers) holds bytes
            // of the same version: they are kept, and with the size known the body ending short
            // of it is resumed from there (`Settlement.incomplete`), never published. (With no
            // size known at all, `bytes N-M/*` can only be taken for the end of the file.)
            return .accept(offset: requested.offset, restarted: false, total: total)
        case 416 where requested.offset > 0:
            // `bytes */N` with N the bytes kept, for the validator sent (If-Range held, or the
            // origin would have sent the whole file): they are the whole file. Nothing to write;
            // the engine verifies them (the answer's body is an error page, dropped).
            if let total = ContentRange.unsatisfiedTotal(head.value("content-range") ?? ""), total == requested.offset,
               knownTotal.map({ $0 == total }) ?? true, sameVersion(head, sentValidator) {
                return .accept(offset: total, restarted: false, total: total)
            }
            return .restartNextAttempt(reason: "416: the kept bytes no longer fit the file")
        case 408, 429, 500...599:
            return .retry(status: status, retryAfter: head.value("retry-after"))
        default:
            return .fail(status: status)
        }
    }

    /// The content coding of `head`'s body (`Content-Encoding` other than `identity`), nil for none.
    static func coding(of head: ResponseHead) -> String? {
        let codings = (head.value("content-encoding") ?? "").split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty && $0 != "identity" }
        return codings.isEmpty ? nil : codings.joined(separator: ", ")
    }

    /// A `200` to a resume that names the strong ETag sent in `If-Range` (and no content coding),
    /// with a `Content-Length` at least the bytes kept and no other size than known: an origin that
    /// ignores `Range`, sending the very version kept again (a strong ETag's equality is the same
    /// bytes, RFC 9110 §8.8.1). Not a new version: the kept bytes stay, and what the answer repeats
    /// of them is checked and skipped (`KeptBytesSkip`). A `Last-Modified` date alone is not taken
    /// for that: one second's resolution.
    private static func repeatsKeptVersion(_ head: ResponseHead, requested: Request, sentValidator: Validator?,
                                           knownTotal: Int64?) -> Bool {
        guard requested.offset > 0, !requested.discardsKeptBytes, let etag = sentValidator?.etag,
              validator(of: head)?.etag == etag, let length = head.contentLength, length >= requested.offset
        else { return false }
        return knownTotal.map { $0 == length } ?? true
    }

    /// No validator in `head` contradicts the one sent.
    private static func sameVersion(_ head: ResponseHead, _ sent: Validator?) -> Bool {
        guard let sent, let offered = rawValidator(head) else { return sent != nil }
        if let etag = sent.etag, let seen = offered.etag, seen != etag { return false }
        if let date = sent.lastModified, let seen = offered.lastModified, seen != date { return false }
        return true
    }

    /// The ETag/Last-Modified as sent, for comparison only (no strength requirement).
    private static func rawValidator(_ head: ResponseHead) -> Validator? {
        let etag = head.value("etag")?.trimmingCharacters(in: .whitespaces)
        let lm = head.value("last-modified")?.trimmingCharacters(in: .whitespaces)
        if etag == nil && lm == nil { return nil }
        return Validator(etag: etag, lastModified: lm)
    }
}

/// `Content-Range: bytes first-last/total` (total may be `*`). Pure.
struct ContentRange: Equatable {
    var first: Int64
    var last: Int64
    var total: Int64?

    static func parse(_ text: String) -> ContentRange? {
        let t = text.trimmingCharacters(in: .whitespaces)
        guard t.lowercased().hasPrefix("bytes ") else { return nil }
        let rest = t.dropFirst(6).trimmingCharacters(in: .whitespaces)
        let slash = rest.split(separator: "/", omittingEmptySubsequences: false)
        guard slash.count == 2 else { return nil }
        let bounds = slash[0].split(separator: "-", omittingEmptySubsequences: false)
        // `last` below Int64.max: one past it (and so `length`) is a number (an origin's range never traps).
        guard bounds.count == 2, let first = Int64(bounds[0]), let last = Int64(bounds[1]), first >= 0, last >= first,
              last < .max else {
            return nil
        }
        var total: Int64?
        if slash[1] != "*" {
            guard let n = Int64(slash[1]), n > last else { return nil }
            total = n
        }
        return ContentRange(first: first, last: last, total: total)
    }

    /// Bytes the range covers.
    var length: Int64 { last - first + 1 }

    /// Whether `head`'s `Content-Length` (when it has one) is the length this range covers: a 206
    /// whose body is not the range it names holds bytes of unknown place (written at the range's
    /// offsets, they would splice wrong bytes into the file).
    func agrees(withLengthOf head: ResponseHead) -> Bool {
        head.value("content-length") == nil || head.contentLength == length
    }

    /// The size in an unsatisfied-range answer, `bytes */N`; nil for anything else.
    static func unsatisfiedTotal(_ text: String) -> Int64? {
        let t = text.trimmingCharacters(in: .whitespaces)
        guard t.lowercased().hasPrefix("bytes */"), let n = Int64(t.dropFirst(8)), n >= 0 else { return nil }
        return n
    }
}
