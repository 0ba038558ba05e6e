/// A forwarded request's original client address, as the forwarding replica vouches for it to the
/// holder: `<address> <unix seconds> <hex HMAC-SHA256 of "client <address> <unix seconds>" under the
/// cluster's shared secret>`. Only a replica knows the secret, so a client cannot name another
/// address; and a value is good for `validity` seconds either side of its time (the replicas'
/// clocks agree within that), so one seen once cannot be replayed later to count under another
/// client's address. A value that does not verify is ignored (the holder counts the connection's
/// own address). Pure: the time is an argument.
public enum ClientSignature {
    /// Seconds a value is accepted before or after the time it names.
    public static let validity: Int64 = 60

    /// The field value vouching for `client` at `now` (unix seconds).
    public static func value(client: String, secret: [UInt8], now: Int64) -> String {
        let stamped = client + " " + String(now)
        return stamped + " " + HMACSHA256.hex(key: secret, message: Array(("client " + stamped).utf8))
    }

    /// The client address `value` vouches for at `now`; nil unless its HMAC is right and its time
    /// within `validity` of `now`.
    public static func client(from value: String, secret: [UInt8], now: Int64) -> String? {
        guard !secret.isEmpty, let space = value.lastIndex(of: " ") else { return nil }
        let stamped = String(value[..<space])
        guard let timeSpace = stamped.lastIndex(of: " "), let time = Int64(stamped[stamped.index(after: timeSpace)...]) else { return nil }
        let client = String(stamped[..<timeSpace])
        let given = Array(value[value.index(after: space)...].utf8)
        let expected = Array(HMACSHA256.hex(key: secret, message: Array(("client " + stamped).utf8)).utf8)
        guard !client.isEmpty, given.count == expected.count,
              // Constant time: every byte is compared.
              zip(given, expected).reduce(UInt8(0), { $0 | ($1.0 ^ $1.1) }) == 0 else { return nil }
        // Compared without arithmetic on the time given (any Int64: no overflow).
        let (earliest, early) = now.subtractingReportingOverflow(validity)
        let (latest, late) = now.addingReportingOverflow(validity)
        return (early || time >= earliest) && (late || time <= latest) ? client : nil
    }
}
