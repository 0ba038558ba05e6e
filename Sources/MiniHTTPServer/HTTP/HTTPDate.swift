import Foundation

/// IMF-fixdate formatting and parsing (`Sun, 06 Nov 1994 08:49:37 GMT`), without locales.
enum HTTPDate {
    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    static func format(_ seconds: time_t) -> String {
        var t = seconds
        var tm = tm()
        gmtime_r(&t, &tm)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(days[Int(tm.tm_wday)]), \(two(tm.tm_mday)) \(months[Int(tm.tm_mon)]) \(tm.tm_year + 1900) "
            + "\(two(tm.tm_hour)):\(two(tm.tm_min)):\(two(tm.tm_sec)) GMT"
    }

    /// Parses an IMF-fixdate; nil for anything else (obsolete formats are treated as absent).
    static func parse(_ text: String) -> time_t? {
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
}
