@testable import DownloaderEngine
import Glibc
import Testing

/// Host spellings read the way the resolver reads them (pure; no connection).
@Suite struct HostLiteralTests {
    @Test(arguments: [
        ("127.0.0.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0X7F000001", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0177.0.0.01", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0", "0.0.0.0"),
        ("0.0.0.0", "0.0.0.0"),
        ("012.0x1.0.1", "10.1.0.1"),
        ("169.254.43518", "169.254.169.254"),
        ("0xa9fea9fe", "169.254.169.254"),
        ("2852039166", "169.254.169.254"),
        ("4294967295", "255.255.255.255"),
        ("8.8.8.8", "8.8.8.8"),
    ])
    func readsIPv4Spellings(host: String, expected: String) throws {
        let address = try #require(HostLiteral.address(host))
        #expect(address.description == expected)
        // The same answer as glibc's inet_aton, which getaddrinfo uses for numeric hosts.
        var reference = in_addr()
        #expect(inet_aton(host, &reference) == 1)
        #expect(address == .v4(UInt32(bigEndian: reference.s_addr)))
    }

    @Test(arguments: ["localhost", "example.com", "1.2.3.4.5", "256.0.0.1", "08.0.0.1", "0x100000000",
                      "4294967296", "1..2", "", "1.2.3.", "127.0.0.1x", "0xg"])
    func namesAndInvalidNumbersAreNotAddresses(host: String) {
        #expect(HostLiteral.address(host) == nil)
        var reference = in_addr()
        #expect(inet_aton(host, &reference) == 0)
    }

    @Test func readsIPv6WithAndWithoutBrackets() {
        #expect(HostLiteral.address("[::1]") == IPAddress("::1"))
        #expect(HostLiteral.address("::1") == IPAddress("::1"))
        #expect(HostLiteral.address("[::ffff:127.0.0.1]") == IPAddress("::ffff:7f00:1"))
        #expect(HostLiteral.address("[::ffff:127.0.0.1]")?.description == "::ffff:127.0.0.1")
        #expect(HostLiteral.address("[zz::1]") == nil)
        #expect(HostLiteral.address("[127.0.0.1]") == nil)
    }
}
