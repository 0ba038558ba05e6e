@testable import DownloaderEngine
import Testing

/// The SSRF guard's default verdict on every denied range, as a pure function over addresses.
/// These addresses are only classified here: no test ever connects to a non-loopback address.
@Suite struct AddressClassifierTests {
    static let defaultRules = EgressRules()

    @Test(arguments: [
        // IPv4 special ranges.
        ("127.0.0.1", "loopback"), ("127.255.255.254", "loopback"),
        ("10.0.0.1", "private"), ("172.16.5.4", "private"), ("192.168.0.1", "private"),
        ("100.64.0.1", "shared address space (CGNAT)"), ("100.127.255.254", "shared address space (CGNAT)"),
        ("169.254.169.254", "link-local"), ("169.254.0.1", "link-local"),
        ("0.0.0.0", "unspecified"), ("0.255.255.255", "unspecified"),
        ("224.0.0.1", "multicast"), ("239.1.2.3", "multicast"),
        ("255.255.255.255", "broadcast"),
        ("240.0.0.1", "reserved"), ("254.255.255.255", "reserved"), ("198.18.0.1", "reserved"),
        ("192.0.2.10", "documentation"),
        // IPv6 equivalents.
        ("::1", "loopback"), ("::", "unspecified"),
        ("fc00::1", "private"), ("fdff:ffff::1", "private"),
        ("fe80::1", "link-local"), ("febf::1", "link-local"),
        ("ff02::1", "multicast"),
        // IPv6 forms that embed IPv4: judged by the IPv4 address inside.
        ("::ffff:127.0.0.1", "loopback"), ("::ffff:10.0.0.1", "private"),
        ("::ffff:169.254.169.254", "link-local"), ("::ffff:100.64.1.1", "shared address space (CGNAT)"),
        ("64:ff9b::7f00:1", "loopback"), ("64:ff9b::a9fe:a9fe", "link-local"), ("64:ff9b::c0a8:1", "private"),
        ("2002:7f00:1::1", "loopback"), ("2002:a00:1::", "private"), ("2002:a9fe:a9fe::1", "link-local"),
        // Teredo (2001::/32) is refused as a whole, whatever it embeds.
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "reserved"), ("2001::1", "reserved"),
    ])
    func deniesByDefault(address: String, category: String) throws {
        let parsed = try #require(IPAddress(address))
        #expect(AddressPolicy.category(of: parsed).rawValue == category)
        let verdict = Self.defaultRules.admit(host: nil, port: 80, address: parsed)
        #expect(verdict == .forbidden("\(parsed) is \(category)"))
        // --allow-private-networks lifts the ban.
        #expect(EgressRules(allowPrivateNetworks: true).admit(host: nil, port: 80, address: parsed) == .allowed)
    }

    @Test(arguments: ["8.8.8.8", "1.1.1.1", "93.184.216.34", "100.128.0.1", "172.32.0.1", "::ffff:8.8.8.8",
                      "64:ff9b::808:808", "2002:808:808::1", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e"])
    func allowsGlobalAddresses(address: String) throws {
        let parsed = try #require(IPAddress(address))
        #expect(Self.defaultRules.admit(host: nil, port: 443, address: parsed) == .allowed)
    }

    @Test func aHostThatIsAnAddressLiteralIsDecidedBeforeConnecting() {
        let rules = Self.defaultRules
        #expect(rules.screen(host: "127.0.0.1", port: 80) == .forbidden("127.0.0.1 is loopback"))
        #expect(rules.screen(host: "0x7f000001", port: 80) == .forbidden("127.0.0.1 is loopback"))
        #expect(rules.screen(host: "2130706433", port: 80) == .forbidden("127.0.0.1 is loopback"))
        #expect(rules.screen(host: "0177.0.0.1", port: 80) == .forbidden("127.0.0.1 is loopback"))
        #expect(rules.screen(host: "127.1", port: 80) == .forbidden("127.0.0.1 is loopback"))
        #expect(rules.screen(host: "[::1]", port: 80) == .forbidden("::1 is loopback"))
        #expect(rules.screen(host: "[::ffff:127.0.0.1]", port: 80) == .forbidden("::ffff:127.0.0.1 is loopback"))
        #expect(rules.screen(host: "0.0.0.0", port: 80) == .forbidden("0.0.0.0 is unspecified"))
        #expect(rules.screen(host: "0xa9fea9fe", port: 80) == .forbidden("169.254.169.254 is link-local"))
        #expect(rules.screen(host: "8.8.8.8", port: 80) == .allowed)
        // A name needs its address: decided at connect time.
        #expect(rules.screen(host: "localhost", port: 80) == .undecided)
        #expect(rules.screen(host: "example.com", port: 80) == .undecided)
    }

    @Test func embeddedIPv4Forms() throws {
        #expect(try #require(IPAddress("::ffff:10.1.2.3")).embeddedIPv4() == IPAddress("10.1.2.3"))
        #expect(try #require(IPAddress("64:ff9b::a01:203")).embeddedIPv4() == IPAddress("10.1.2.3"))
        #expect(try #require(IPAddress("::1")).embeddedIPv4() == nil)
        #expect(try #require(IPAddress("2002:a01:203::")).embeddedIPv4() == nil)
        #expect(try #require(IPAddress("2002:a01:203::")).embeddedIPv4(includingTunnels: true) == IPAddress("10.1.2.3"))
        // Teredo stores the client address inverted: 0xf5fefdfc is ~10.1.2.3.
        #expect(try #require(IPAddress("2001:0:1:2:0:0:f5fe:fdfc")).embeddedIPv4(includingTunnels: true) == IPAddress("10.1.2.3"))
    }
}
