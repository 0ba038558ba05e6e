import Foundation

/// What `TestOrigin` answers to one request: a pure decision from the request, the served resources
/// and the current switches. No I/O here; `TestOrigin` writes the result.
struct OriginResponse: Equatable {
    enum Body: Equatable {
        case none
        case text(String)
        /// Bytes `range` of the deterministic body with `seed` (see `OriginBody`).
        case resource(seed: UInt64, range: Range<Int>)
    }

    var status: Int
    var headers: [RecordedRequest.Header]
    var body: Body
    /// Close the connection after this many body bytes (the `.cut` fault).
    var cutAfter: Int?
    /// Send this many body bytes, then nothing (the `.stall` fault).
    var stallAfter: Int?
    /// After `cutAfter` bytes, reset the connection instead of closing it (the `.reset` fault).
    var reset = false
    /// After `cutAfter` bytes and before closing, bump this resource's version (`.changeVersion`).
    var changeVersionOf: String?
    /// After `cutAfter` bytes and before closing, give this resource that size (`.resize`).
    var resizeTo: Resize?

    struct Resize: Equatable {
        var path: String
        var size: Int
    }
    /// Send the body with chunked transfer coding.
    var chunked = false
    /// The Content-Length sent when it is not the body's length (`contentLengthDelta`).
    var announcedLength: Int?
    /// Close the connection after the response.
    var close: Bool
}

/// One served file: its deterministic body, current version and validators.
struct OriginResource: Sendable, Equatable {
    var path: String
    var size: Int
    var version: Int
    /// Bumped by `changeBytesKeepingValidators`: other bytes under the same validators.
    var salt: UInt64 = 0

    var seed: UInt64 { OriginBody.seed(path: path, version: version) ^ salt }
    /// The strong entity-tag of this version, quoted.
    var etag: String { "\"\(String(OriginBody.seed(path: path, version: version), radix: 16).prefix(12))-v\(version)\"" }
    /// Last-Modified of this version (one day apart per version, long before now).
    var lastModified: String { OriginHTTPDate.format(epochSeconds: 1_700_000_000 + version * 86_400) }
}

enum OriginResponder {
    static func respond(
        method: String, path: String, headers: [RecordedRequest.Header],
        resource: OriginResource?, redirect: (to: String, status: Int)?,
        settings: TestOrigin.Settings, fault: TestOrigin.Fault?, baseURL: String, now: Int
    ) -> OriginResponse {
        func header(_ name: String) -> String? { headers.first { $0.name.lowercased() == name }?.value }
        var fields: [RecordedRequest.Header] = [.init(name: "Date", value: OriginHTTPDate.format(epochSeconds: now))]
        guard method == "GET" || method == "HEAD" else {
            return OriginResponse(status: 405, headers: fields + [.init(name: "Allow", value: "GET, HEAD")],
                                  body: .text("method not allowed\n"), close: true)
        }
        if let redirect {
            // An intermediate hop with validators of its own, which a client must not keep.
            fields += [
                .init(name: "Location", value: redirect.to.hasPrefix("/") ? baseURL + redirect.to : redirect.to),
                .init(name: "ETag", value: "\"hop-\(path.utf8.count)-redirect\""),
                .init(name: "Last-Modified", value: OriginHTTPDate.format(epochSeconds: 1_600_000_000)),
            ]
            return OriginResponse(status: redirect.status, headers: fields, body: .text("redirecting\n"), close: false)
        }
        guard let resource else {
            return OriginResponse(status: 404, headers: fields, body: .text("not found\n"), close: false)
        }
        if case .status(let status, let retryAfter)? = fault {
            if let retryAfter { fields.append(.init(name: "Retry-After", value: retryAfter)) }
            return OriginResponse(status: status, headers: fields, body: .text("fault \(status)\n"), close: false)
        }

        let etag: String?
        let lastModified: String?
        switch settings.validators {
        case .strong: (etag, lastModified) = (resource.etag, resource.lastModified)
        case .weakETag: (etag, lastModified) = ("W/" + resource.etag, resource.lastModified)
        case .etagOnly: (etag, lastModified) = (resource.etag, nil)
        case .lastModifiedOnly: (etag, lastModified) = (nil, resource.lastModified)
        case .none: (etag, lastModified) = (nil, nil)
        }
        if let etag { fields.append(.init(name: "ETag", value: etag)) }
        if let lastModified { fields.append(.init(name: "Last-Modified", value: lastModified)) }
        if !settings.ignoreRanges || settings.advertiseIgnoredRanges { fields.append(.init(name: "Accept-Ranges", value: "bytes")) }
        fields.append(.init(name: "Content-Type", value: settings.contentType))
        if let encoding = settings.contentEncoding { fields.append(.init(name: "Content-Encoding", value: encoding)) }
        if let disposition = settings.contentDisposition { fields.append(.init(name: "Content-Disposition", value: disposition)) }

        var status = 200
        var range = 0..<resource.size
        if !settings.ignoreRanges, let rangeHeader = header("range"),
           ifRangeHolds(header("if-range"), etag: etag, lastModified: lastModified) {
            switch parseRange(rangeHeader, size: resource.size) {
            case .ignore:
                break
            case .unsatisfiable:
                fields.append(.init(name: "Content-Range", value: "bytes */\(resource.size)"))
                var page = OriginResponse(status: 416, headers: fields, body: .text("range not satisfiable\n"), close: false)
                // A `.cut` or `.reset` cuts the page short of its Content-Length too.
                switch fault {
                case .cut(let after)?: page.cutAfter = after
                case .reset(let after)?: (page.cutAfter, page.reset) = (after, true)
                default: break
                }
                return page
            case .satisfiable(let requested):
                status = 206
                range = requested
                if settings.wrongContentRangeStart {
                    // Declares (and serves, consistently) a range starting one byte off the request.
                    let start = requested.lowerBound > 0 ? requested.lowerBound - 1 : requested.lowerBound + 1
                    range = min(start, resource.size - 1)..<requested.upperBound
                }
                if let cap = settings.maxRangeLength, range.count > cap {
                    range = range.lowerBound..<(range.lowerBound + cap)  // An origin capping its answers' length.
                }
                fields.append(.init(name: "Content-Range",
                                    value: "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(resource.size)"))
                range = range.lowerBound..<min(resource.size, range.upperBound + settings.rangeOverrun)
            }
        }
        var response = OriginResponse(status: status, headers: fields,
                                      body: method == "HEAD" ? .none : .resource(seed: resource.seed, range: range),
                                      close: settings.closeDelimited)
        if settings.chunked && method == "GET" {
            response.headers.append(.init(name: "Transfer-Encoding", value: "chunked"))
            response.chunked = true
        } else if !settings.closeDelimited || method == "HEAD" {
            response.headers.append(.init(name: "Content-Length", value: String(max(0, range.count + settings.contentLengthDelta))))
            if settings.contentLengthDelta != 0 {
                response.close = true
                response.announcedLength = max(0, range.count + settings.contentLengthDelta)
            }
        }
        switch fault {
        case .cut(let after)?: response.cutAfter = after
        case .stall(let after)?: response.stallAfter = after
        case .reset(let after)?: (response.cutAfter, response.reset) = (after, true)
        case .changeVersion(let after)?: (response.cutAfter, response.changeVersionOf) = (after, path)
        case .resize(let after, let size)?: (response.cutAfter, response.resizeTo) = (after, .init(path: path, size: size))
        default: break
        }
        return response
    }

    /// RFC 9110 §13.1.5: an entity-tag matches only by strong comparison; a date only when it equals a
    /// Last-Modified (ours are always strong: far older than Date). No If-Range: the range applies.
    static func ifRangeHolds(_ ifRange: String?, etag: String?, lastModified: String?) -> Bool {
        guard let ifRange else { return true }
        if ifRange.hasPrefix("\"") || ifRange.hasPrefix("W/") {
            guard let etag, !etag.hasPrefix("W/"), !ifRange.hasPrefix("W/") else { return false }
            return etag == ifRange
        }
        guard let lastModified else { return false }
        return ifRange == lastModified
    }

    enum RangeOutcome: Equatable {
        case ignore
        case unsatisfiable
        case satisfiable(Range<Int>)
    }

    /// One `bytes=` range (`N-`, `N-M` or `-S`); several ranges or other syntax are ignored (200).
    static func parseRange(_ value: String, size: Int) -> RangeOutcome {
        guard value.hasPrefix("bytes="), !value.contains(",") else { return .ignore }
        let spec = value.dropFirst("bytes=".count).trimmingCharacters(in: .whitespaces)
        let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return .ignore }
        if parts[0].isEmpty {
            guard let suffix = Int(parts[1]), suffix >= 0 else { return .ignore }
            guard suffix > 0, size > 0 else { return .unsatisfiable }
            return .satisfiable(max(0, size - suffix)..<size)
        }
        guard let first = Int(parts[0]), first >= 0 else { return .ignore }
        var last = size - 1
        if !parts[1].isEmpty {
            guard let requestedLast = Int(parts[1]), requestedLast >= first else { return .ignore }
            last = min(requestedLast, size - 1)
        }
        guard first < size else { return .unsatisfiable }
        return .satisfiable(first..<(last + 1))
    }
}

/// IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) without locale or formatter state.
enum OriginHTTPDate {
    static func format(epochSeconds: Int) -> String {
        let days = epochSeconds >= 0 ? epochSeconds / 86_400 : (epochSeconds - 86_399) / 86_400
        let secondsOfDay = epochSeconds - days * 86_400
        // Civil-from-days (Howard Hinnant's algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthPrime = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthPrime + 2) / 5 + 1
        let month = monthPrime < 10 ? monthPrime + 3 : monthPrime - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        let weekday = ((days % 7) + 11) % 7  // 1970-01-01 was a Thursday.
        let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(weekdays[weekday]), \(two(day)) \(months[month - 1]) \(year) "
            + "\(two(secondsOfDay / 3600)):\(two(secondsOfDay % 3600 / 60)):\(two(secondsOfDay % 60)) GMT"
    }
}
