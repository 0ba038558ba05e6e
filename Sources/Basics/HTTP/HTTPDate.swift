import Foundation

/// HTTP-dates (RFC 9110 §5.6.7), without locales or date formatters: IMF-fixdate formatting
/// (`Sun, 06 Nov 1994 08:49:37 GMT`), a strict fixed-position IMF-fixdate parser, and a parser for
/// all three forms a recipient must accept (IMF-fixdate, obsolete RFC 850, asctime). Pure.
public enum HTTPDate {
    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    private static let lowercaseMonths = months.map { $0.lowercased() }

    /// `seconds` since the epoch as an IMF-fixdate (always 29 ASCII bytes for years 1000–9999).
    public static func format(_ seconds: time_t) -> String {
        var t = seconds
        var tm = tm()
        gmtime_r(&t, &tm)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(days[Int(tm.tm_wday)]), \(two(tm.tm_mday)) \(months[Int(tm.tm_mon)]) \(Int(tm.tm_year) + 1900) "
            + "\(two(tm.tm_hour)):\(two(tm.tm_min)):\(two(tm.tm_sec)) GMT"
    }

    /// Parses any of the three HTTP-date forms exactly as RFC 9110 §5.6.7 writes them (IMF-fixdate,
    /// RFC 850 `Sunday, 06-Nov-94 08:49:37 GMT`, asctime `Sun Nov  6 08:49:37 1994`); nil for anything
    /// else (`+0100` for `GMT`, a zone name, a missing field), which a recipient must then ignore.
    /// The server's conditional requests use it: a wrong date never makes a `304` or a `412`.
    public static func parseStrict(_ text: String) -> time_t? {
        if let fixed = parseIMFFixdate(text) { return fixed }
        let b = Array(text.utf8)
        func imf(_ parts: [ArraySlice<UInt8>]) -> String { String(decoding: parts.joined(), as: UTF8.self) }
        if b.count == 24, b[3] == 32, b[7] == 32, b[10] == 32, b[19] == 32 {  // asctime
            let day: ArraySlice<UInt8> = b[8] == 32 ? [48, b[9]] : b[8..<10]
            return parseIMFFixdate(imf([b[0..<3], ArraySlice(", ".utf8), day, [32], b[4..<7], [32], b[20..<24], [32], b[11..<19],
                                        ArraySlice(" GMT".utf8)]))
        }
        // RFC 850: weekday, `, `, dd-Mon-yy hh:mm:ss GMT (two-digit years 70–99 → 19xx, else 20xx).
        guard let comma = b.firstIndex(of: 44), b.count - comma == 24, b[comma + 1] == 32,
              b[comma + 4] == 45, b[comma + 8] == 45, b[comma + 11] == 32 else { return nil }
        let rest = b[(comma + 2)...]
        let year = rest.dropFirst(7).prefix(2)
        guard year.allSatisfy({ $0 >= 48 && $0 <= 57 }), let tens = year.first else { return nil }
        let century: ArraySlice<UInt8> = tens >= 55 ? [49, 57] : [50, 48]
        // The weekday is not checked (`parseIMFFixdate` reads positions from the day on).
        return parseIMFFixdate(imf([ArraySlice("Xxx, ".utf8), rest.prefix(2), [32], rest.dropFirst(3).prefix(3), [32], century, year,
                                    rest.dropFirst(9)]))
    }

    /// Parses an IMF-fixdate only, by fixed byte positions (no tokenising, no `Calendar`); nil for
    /// anything else.
    public static func parseIMFFixdate(_ text: String) -> time_t? {
        let b = Array(text.utf8)
        guard b.count == 29, b[3] == UInt8(ascii: ","), b[4] == 32, b[7] == 32, b[11] == 32, b[16] == 32,
              b[19] == UInt8(ascii: ":"), b[22] == UInt8(ascii: ":"), b[25] == 32,
              String(decoding: b[26..<29], as: UTF8.self) == "GMT" else { return nil }
        func num(_ r: Range<Int>) -> Int32? {
            var v: Int32 = 0
            for i in r {
                guard b[i] >= 48, b[i] <= 57 else { return nil }
                v = v * 10 + Int32(b[i] - 48)
            }
            return v
        }
        let monthText = String(decoding: b[8..<11], as: UTF8.self)
        guard let day = num(5..<7), let month = months.firstIndex(of: monthText), let year = num(12..<16),
              let hour = num(17..<19), let minute = num(20..<22), let second = num(23..<25),
              day >= 1, day <= 31, hour < 24, minute < 60, second < 61 else { return nil }
        var tm = tm()
        tm.tm_year = year - 1900
        tm.tm_mon = Int32(month)
        tm.tm_mday = day
        tm.tm_hour = hour
        tm.tm_min = minute
        tm.tm_sec = second
        return timegm(&tm)
    }

    /// Parses any of the three HTTP-date forms: IMF-fixdate, RFC 850 (`Sunday, 06-Nov-94 08:49:37
    /// GMT`, two-digit years 70–99 → 19xx, else 20xx) and asctime (`Sun Nov  6 08:49:37 1994`);
    /// month names in any case, a leap second read as :59. The engine reads `Retry-After`,
    /// `Last-Modified` and `Date` with it (once per origin response: no fast path needed).
    public static func parse(_ text: String) -> Date? {
        // Split on spaces, commas and dashes; times keep their colons.
        let tokens = text.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "-" }).map(String.init)
        var day: Int?, month: Int?, year: Int?, time: (Int, Int, Int)?
        for token in tokens {
            let lower = token.lowercased()
            if token.contains(":") {
                let parts = token.split(separator: ":").compactMap { Int($0) }
                guard parts.count == 3 else { return nil }
                time = (parts[0], parts[1], parts[2])
            } else if let m = lowercaseMonths.firstIndex(of: String(lower.prefix(3))), lower.count >= 3, Int(lower) == nil {
                month = m + 1
            } else if let n = Int(token) {
                if token.count >= 3 { year = n } else if day == nil { day = n } else { year = n }
            }
        }
        guard let d = day, let m = month, var y = year, let (hh, mm, ss) = time else { return nil }
        if y < 100 { y += y < 70 ? 2000 : 1900 }  // RFC 850 two-digit years
        guard (1...31).contains(d), (0...23).contains(hh), (0...59).contains(mm), (0...60).contains(ss) else { return nil }
        var c = DateComponents()
        c.year = y; c.month = m; c.day = d; c.hour = hh; c.minute = mm; c.second = min(ss, 59)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(secondsFromGMT: 0) ?? calendar.timeZone
        return calendar.date(from: c)
    }
}
