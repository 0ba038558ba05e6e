import Foundation

/// Parses HTTP-dates (RFC 9110 §5.6.7): IMF-fixdate, obsolete RFC 850 and asctime forms. Pure.
enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    static func parse(_ text: String) -> Date? {
        // Split on spaces, commas and dashes; times keep their colons.
        let tokens = text.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "-" }).map(String.init)
        var day: Int?, month: Int?, year: Int?, time: (Int, Int, Int)?
        for token in tokens {
            let lower = token.lowercased()
            if token.contains(":") {
                let parts = token.split(separator: ":").compactMap { Int($0) }
                guard parts.count == 3 else { return nil }
                time = (parts[0], parts[1], parts[2])
            } else if let m = months.firstIndex(of: String(lower.prefix(3))), lower.count >= 3, Int(lower) == nil {
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
