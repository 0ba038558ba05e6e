/// A forwarded request's original client address, as the forwarding replica vouches for it to the
/// holder: `<address> <hex HMAC-SHA256 of "client " + address under the cluster's shared secret>`.
/// Only a replica knows the secret, so a client cannot name another address; a value that does not
/// verify is ignored (the holder counts the connection's own address). Pure.
public enum ClientSignature {
    /// The field value vouching for `client`.
    public static func value(client: String, secret: [UInt8]) -> String {
        client + " " + HMACSHA256.hex(key: secret, message: Array(("client " + client).utf8))
    }

    /// The client address `value` vouches for; nil unless its HMAC is right.
    public static func client(from value: String, secret: [UInt8]) -> String? {
        guard !secret.isEmpty, let space = value.lastIndex(of: " ") else { return nil }
        let client = String(value[..<space])
        let given = Array(value[value.index(after: space)...].utf8)
        let expected = Array(HMACSHA256.hex(key: secret, message: Array(("client " + client).utf8)).utf8)
        guard !client.isEmpty, given.count == expected.count else { return nil }
        // Constant time: every byte is compared.
        return zip(given, expected).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0 ? client : nil
    }
}
