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
            error = DownloadFailure(code: code, message: message, httpStatus: status)
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
