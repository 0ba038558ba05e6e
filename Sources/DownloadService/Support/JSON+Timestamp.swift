import Foundation

extension JSON {
    /// RFC 3339 timestamp with milliseconds (truncated), in UTC: `2026-11-30T06:27:38.969Z`, the
    /// format of `ISO8601FormatStyle` at a fraction of its cost (it runs for every log line and
    /// twice per snapshot answer).
    static func timestamp(_ date: Date) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(24)
        writeTimestamp(date, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends `timestamp(date)`'s 24 bytes (unquoted). The calendar is computed, not looked up
    /// (`gmtime_r` takes glibc's time-zone lock on every call). A date outside the years 0...9999
    /// (a damaged stored row) is written as the nearest one inside, not-a-number as 1970: never a trap.
    static func writeTimestamp<Out: JSONOutput>(_ date: Date, into out: inout Out) {
        let t = date.timeIntervalSince1970
        let clamped = t.isNaN ? 0 : min(max(t, -62_167_219_200), 253_402_300_799.999)
        let milliseconds = Int64((clamped * 1000).rounded(.down))
        let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let civil = CivilDate(daysSince1970: days)
        let time = seconds - days * 86_400
        var text: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes of scratch, written in place
        withUnsafeMutableBytes(of: &text) { b in
            func put(_ value: Int64, _ width: Int, at offset: Int) {
                var v = value
                for i in stride(from: offset + width - 1, through: offset, by: -1) {
                    b[i] = UInt8(48 + v % 10)
                    v /= 10
                }
            }
            put(civil.year, 4, at: 0); b[4] = UInt8(ascii: "-")
            put(civil.month, 2, at: 5); b[7] = UInt8(ascii: "-")
            put(civil.day, 2, at: 8); b[10] = UInt8(ascii: "T")
            put(time / 3600, 2, at: 11); b[13] = UInt8(ascii: ":")
            put(time / 60 % 60, 2, at: 14); b[16] = UInt8(ascii: ":")
            put(time % 60, 2, at: 17); b[19] = UInt8(ascii: ".")
            put(milliseconds - seconds * 1000, 3, at: 20); b[23] = UInt8(ascii: "Z")
            out.append(bytes: UnsafeBufferPointer(b.bindMemory(to: UInt8.self)))
        }
    }
}

/// A day of the proleptic Gregorian calendar from its distance to 1970-01-01 (H. Hinnant's
/// `civil_from_days`: eras of 400 years, years starting in March so that leap days come last).
struct CivilDate: Equatable {
    let year: Int64
    let month: Int64
    let day: Int64

    init(year: Int64, month: Int64, day: Int64) {
        self.year = year
        self.month = month
        self.day = day
    }

    init(daysSince1970 days: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    }
}
