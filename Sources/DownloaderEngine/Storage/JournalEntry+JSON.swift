import Foundation

// The fast start-up path of `StateJournal.load()`: a parsed `JournalJSON` object mapped by hand.
extension JournalEntry {
    /// From a parsed journal object; nil when anything is missing or of the wrong type.
    init?(json o: [String: JournalJSON]) {
        func string(_ key: String) -> String?? {
            guard let value = o[key] else { return .some(nil) }
            guard case .string(let text) = value else { return nil }
            return .some(text)
        }
        func int64(_ key: String) -> Int64?? {
            guard let value = o[key] else { return .some(nil) }
            guard case .number(let n) = value, let exact = Int64(exactly: n) else { return nil }
            return .some(exact)
        }
        func date(_ key: String) -> Date? {
            guard case .number(let n)? = o[key] else { return nil }
            return Date(timeIntervalSince1970: n)
        }
        guard let id = string("id") ?? nil, let url = string("url") ?? nil,
              let storage = (string("storage") ?? nil).flatMap(StorageClass.init(rawValue:)),
              let state = (string("state") ?? nil).flatMap(DownloadState.init(rawValue:)),
              let verifiedOffset = int64("verifiedOffset") ?? nil,
              let createdAt = date("createdAt"), let updatedAt = date("updatedAt"), let lastAccess = date("lastAccess"),
              let expectedTotal = int64("expectedTotal"), let expectedSize = int64("expectedSize"), let size = int64("size"),
              let expectedSHA256 = string("expectedSHA256"), let fileName = string("fileName"),
              let finalPath = string("finalPath"), let sha256 = string("sha256")
        else { return nil }
        var validator: Validator?
        if let value = o["validator"] {
            guard case .object(let v) = value else { return nil }
            var etag: String?
            var lastModified: String?
            if let e = v["etag"] {
                guard case .string(let text) = e else { return nil }
                etag = text
            }
            if let l = v["lastModified"] {
                guard case .string(let text) = l else { return nil }
                lastModified = text
            }
            validator = Validator(etag: etag, lastModified: lastModified)
        }
        var error: DownloadFailure?
        if let value = o["error"] {
            guard case .object(let e) = value, case .string(let code)? = e["code"], case .string(let message)? = e["message"]
            else { return nil }
            var status: Int?
            if let s = e["httpStatus"] {
                guard case .number(let n) = s, let exact = Int(exactly: n) else { return nil }
                status = exact
            }
            error = DownloadFailure(journalCode: code, message: message, httpStatus: status)
        }
        var tokens: Set<String>?
        if let value = o["tokens"] {
            guard case .array(let list) = value else { return nil }
            var set = Set<String>(minimumCapacity: list.count)
            for item in list {
                guard case .string(let token) = item else { return nil }
                set.insert(token)
            }
            tokens = set
        }
        self.init(id: id, url: url, storage: storage, state: state, validator: validator, expectedTotal: expectedTotal,
                  verifiedOffset: verifiedOffset, expectedSHA256: expectedSHA256, expectedSize: expectedSize,
                  fileName: fileName, finalPath: finalPath, sha256: sha256, size: size, createdAt: createdAt,
                  updatedAt: updatedAt, lastAccess: lastAccess, error: error, tokens: tokens)
    }
}

// The writing side: the journal document by hand, in the format the header of `StateJournal.swift`
// describes (what JSONEncoder with sorted keys wrote, slashes left unescaped). JSONEncoder took
// ~20 % of the service's CPU while a burst of requests kept the journal dirty.
extension JournalEntry {
    /// Appends this entry as a JSON object, keys in byte order, nil optionals omitted.
    func write(into out: inout [UInt8]) {
        var o = JournalObjectWriter()
        o.number("createdAt", createdAt.timeIntervalSince1970, into: &out)
        if let error {
            o.key("error", into: &out)
            var e = JournalObjectWriter()
            e.string("code", error.journalCode, into: &out)
            e.integer("httpStatus", error.httpStatus.map(Int64.init), into: &out)
            e.string("message", error.message, into: &out)
            e.close(into: &out)
        }
        o.string("expectedSHA256", expectedSHA256, into: &out)
        o.integer("expectedSize", expectedSize, into: &out)
        o.integer("expectedTotal", expectedTotal, into: &out)
        o.string("fileName", fileName, into: &out)
        o.string("finalPath", finalPath, into: &out)
        o.string("id", id, into: &out)
        o.number("lastAccess", lastAccess.timeIntervalSince1970, into: &out)
        o.string("sha256", sha256, into: &out)
        o.integer("size", size, into: &out)
        o.string("state", state.rawValue, into: &out)
        o.string("storage", storage.rawValue, into: &out)
        if let tokens {
            o.key("tokens", into: &out)
            out.append(UInt8(ascii: "["))
            for (index, token) in tokens.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                JournalObjectWriter.quote(token, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
        o.number("updatedAt", updatedAt.timeIntervalSince1970, into: &out)
        o.string("url", url, into: &out)
        if let validator {
            o.key("validator", into: &out)
            var v = JournalObjectWriter()
            v.string("etag", validator.etag, into: &out)
            v.string("lastModified", validator.lastModified, into: &out)
            v.close(into: &out)
        }
        o.integer("verifiedOffset", verifiedOffset, into: &out)
        o.close(into: &out)
    }
}

/// Writes one JSON object's members in the order given (callers give them in key order).
struct JournalObjectWriter {
    private var opened = false

    /// Opens the object if needed, separates members, and writes `"key":`.
    mutating func key(_ key: String, into out: inout [UInt8]) {
        out.append(opened ? UInt8(ascii: ",") : UInt8(ascii: "{"))
        opened = true
        Self.quote(key, into: &out)
        out.append(UInt8(ascii: ":"))
    }

    mutating func close(into out: inout [UInt8]) {
        if !opened { out.append(UInt8(ascii: "{")) }
        out.append(UInt8(ascii: "}"))
    }

    mutating func string(_ key: String, _ value: String?, into out: inout [UInt8]) {
        guard let value else { return }
        self.key(key, into: &out)
        Self.quote(value, into: &out)
    }

    mutating func integer(_ key: String, _ value: Int64?, into out: inout [UInt8]) {
        guard let value else { return }
        self.key(key, into: &out)
        out.append(contentsOf: String(value).utf8)
    }

    /// A double in its shortest round-tripping form (integral values without `.0`; non-finite as 0).
    mutating func number(_ key: String, _ value: Double, into out: inout [UInt8]) {
        self.key(key, into: &out)
        if value == value.rounded(), abs(value) < 1e15 {
            out.append(contentsOf: String(Int64(value)).utf8)
        } else {
            out.append(contentsOf: (value.isFinite ? "\(value)" : "0").utf8)
        }
    }

    /// `text` as a JSON string: quotes, backslashes and control characters escaped.
    static func quote(_ text: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                out.append(UInt8(ascii: "\\"))
                out.append(byte)
            } else if byte < 0x20 {
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                        hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            } else {
                out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
