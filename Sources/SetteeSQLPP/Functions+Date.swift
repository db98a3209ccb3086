import Foundation  // TimeZone, for local time
import SetteeCore

/// The date functions: ISO-8601 parsing and formatting and date arithmetic, by hand.
extension FunctionLibrary {
    // MARK: - Date functions

    static func strToMillis(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .string(let s) = v[0], let millis = parseISO8601(s) else { return .null }
            return .int(millis)
        }
    }

    static func strToUTC(_ args: [JSON?]) -> JSON? {
        strict(args) { v in
            guard case .string(let s) = v[0], let millis = parseISO8601(s) else { return .null }
            return .string(formatISO8601(millis, offsetSeconds: 0))
        }
    }

    static func millisToString(_ args: [JSON?], utc: Bool) -> JSON? {
        strict(args) { v in
            let millis: Int64
            switch v[0] {
            case .int(let i): millis = i
            case .double(let d):
                guard d.isFinite, Swift.abs(d) <= Double(maxMillis) else { return .null }
                millis = Int64(d.rounded(.towardZero))
            default: return .null
            }
            guard millis >= -maxMillis, millis <= maxMillis else { return .null }
            return .string(formatISO8601(millis, offsetSeconds: utc ? 0 : localOffsetMinutes(atUTCMillis: millis) * 60))
        }
    }

    /// ±100,000,000 days around the epoch (JavaScript's date range).
    static let maxMillis: Int64 = 8_640_000_000_000_000

    /// Parses `YYYY-MM-DD[( |T)hh:mm[:ss[.fff]]][ ][Z|±hh[:mm]|±hhmm]` into milliseconds since the epoch; without a
    /// zone the time is local (the process's time zone).
    static func parseISO8601(_ raw: String) -> Int64? {
        let b = Array(raw.trimmingWhitespace().utf8)
        var i = 0
        func digits(_ count: Int) -> Int64? {
            guard i + count <= b.count else { return nil }
            var value: Int64 = 0
            for k in i..<(i + count) {
                let c = b[k]
                guard c >= 0x30, c <= 0x39 else { return nil }
                value = value * 10 + Int64(c - 0x30)
            }
            i += count
            return value
        }
        func eat(_ c: UInt8) -> Bool {
            if i < b.count, b[i] == c { i += 1; return true }
            return false
        }
        func isDigit(_ k: Int) -> Bool { k < b.count && b[k] >= 0x30 && b[k] <= 0x39 }

        guard let year = digits(4), eat(0x2D), let month = digits(2), eat(0x2D), let day = digits(2),
              (1...12).contains(month), day >= 1, day <= daysInMonth(year, month)
        else { return nil }
        var hour: Int64 = 0, minute: Int64 = 0, second: Int64 = 0, millis: Int64 = 0
        var zoneSeconds: Int64?
        if i < b.count {
            guard eat(0x54) || eat(0x74) || eat(0x20) else { return nil }  // T, t, space
            guard let h = digits(2), eat(0x3A), let m = digits(2) else { return nil }
            hour = h
            minute = m
            if eat(0x3A) {
                guard let s = digits(2) else { return nil }
                second = s
                if eat(0x2E) || eat(0x2C) {  // fraction: keep milliseconds, rounding on the fourth digit
                    guard isDigit(i) else { return nil }
                    var place: Int64 = 100
                    var fourth: Int64 = 0
                    var index = 0
                    while isDigit(i) {
                        let d = Int64(b[i] - 0x30)
                        if index < 3 { millis += d * place; place /= 10 } else if index == 3 { fourth = d }
                        index += 1
                        i += 1
                    }
                    if fourth >= 5 { millis += 1 }
                }
            }
            _ = eat(0x20)
            if eat(0x5A) || eat(0x7A) {  // Z, z
                zoneSeconds = 0
            } else if i < b.count, b[i] == 0x2B || b[i] == 0x2D {
                let negative = b[i] == 0x2D
                i += 1
                guard let zh = digits(2) else { return nil }
                var zm: Int64 = 0
                if eat(0x3A) {
                    guard let m = digits(2) else { return nil }
                    zm = m
                } else if isDigit(i) {
                    guard let m = digits(2) else { return nil }
                    zm = m
                }
                guard zh <= 23, zm <= 59 else { return nil }
                zoneSeconds = (negative ? -1 : 1) * (zh * 3600 + zm * 60)
            }
            guard i == b.count else { return nil }
        }
        guard hour <= 23, minute <= 59, second <= 59 else { return nil }
        let days = daysFromCivil(year, month, day)
        let wall = (((days * 24 + hour) * 60 + minute) * 60 + second) * 1000 + millis
        if let zoneSeconds { return wall - zoneSeconds * 1000 }
        // Local time: find the offset in force at that wall-clock time (two passes settle DST changes).
        let guess = Int64(localOffsetMinutes(atUTCMillis: wall)) * 60_000
        let settled = Int64(localOffsetMinutes(atUTCMillis: wall - guess)) * 60_000
        return wall - settled
    }

    /// `YYYY-MM-DDThh:mm:ss[.sss](Z|±hh:mm)`: milliseconds only when non-zero, `Z` when the offset is zero.
    static func formatISO8601(_ millis: Int64, offsetSeconds: Int) -> String {
        let wall = millis + Int64(offsetSeconds) * 1000
        let (seconds, milli) = floorDivMod(wall, 1000)
        let (days, secondOfDay) = floorDivMod(seconds, 86_400)
        let (year, month, day) = civilFromDays(days)
        var out = year < 0 ? "-" + pad(-year, 4) : pad(year, 4)
        out += "-" + pad(month, 2) + "-" + pad(day, 2)
        out += "T" + pad(secondOfDay / 3600, 2) + ":" + pad(secondOfDay % 3600 / 60, 2) + ":" + pad(secondOfDay % 60, 2)
        if milli != 0 { out += "." + pad(milli, 3) }
        if offsetSeconds == 0 {
            out += "Z"
        } else {
            let magnitude = Swift.abs(offsetSeconds)
            out += (offsetSeconds < 0 ? "-" : "+") + pad(Int64(magnitude / 3600), 2) + ":" + pad(Int64(magnitude % 3600 / 60), 2)
        }
        return out
    }

    /// The process's UTC offset, in whole minutes, at an instant.
    static func localOffsetMinutes(atUTCMillis millis: Int64) -> Int {
        let date = Date(timeIntervalSince1970: Double(millis) / 1000)
        return TimeZone.current.secondsFromGMT(for: date) / 60
    }

    static func pad(_ value: Int64, _ width: Int) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }

    static func floorDivMod(_ a: Int64, _ b: Int64) -> (Int64, Int64) {
        var q = a / b
        var r = a % b
        if r < 0 { q -= 1; r += b }
        return (q, r)
    }

    static func isLeapYear(_ y: Int64) -> Bool { (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 }

    static func daysInMonth(_ y: Int64, _ m: Int64) -> Int64 {
        switch m {
        case 2: return isLeapYear(y) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(_ year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01.
    static func civilFromDays(_ days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
