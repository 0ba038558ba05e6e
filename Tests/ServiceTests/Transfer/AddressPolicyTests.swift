@testable import DownloaderEngine
import Testing

/// The SSRF guard's address classification.
@Suite struct AddressPolicyTests {
    @Test(arguments: [
        ("8.8.8.8", AddressPolicy.Category.global),
        ("93.184.216.34", .global),
        ("1.1.1.1", .global),
        ("0.0.0.0", .unspecified),
        ("0.1.2.3", .unspecified),
        ("127.0.0.1", .loopback),
        ("127.255.255.254", .loopback),
        ("10.0.0.1", .privateUse),
        ("10.255.255.255", .privateUse),
        ("172.16.0.1", .privateUse),
        ("172.31.255.255", .privateUse),
        ("172.32.0.1", .global),
        ("172.15.255.255", .global),
        ("192.168.1.1", .privateUse),
        ("100.64.0.1", .sharedAddressSpace),
        ("100.127.255.255", .sharedAddressSpace),
        ("100.128.0.1", .global),
        ("169.254.169.254", .linkLocal),
        ("224.0.0.1", .multicast),
        ("239.255.255.250", .multicast),
        ("255.255.255.255", .broadcast),
        ("240.0.0.1", .reserved),
        ("192.0.0.8", .reserved),
        ("198.18.0.1", .reserved),
        ("192.0.2.1", .documentation),
        ("198.51.100.7", .documentation),
        ("203.0.113.9", .documentation),
        ("::", .unspecified),
        ("::1", .loopback),
        ("::ffff:127.0.0.1", .loopback),
        ("::ffff:10.1.2.3", .privateUse),
        ("::ffff:169.254.169.254", .linkLocal),
        ("::ffff:8.8.8.8", .global),
        ("::127.0.0.1", .loopback),
        ("64:ff9b::a00:1", .privateUse),
        ("64:ff9b::808:808", .global),
        ("2002:7f00:1::", .loopback),
        ("2002:808:808::1", .global),
        ("fc00::1", .privateUse),
        ("fd12:3456::1", .privateUse),
        ("fe80::1", .linkLocal),
        ("febf::1", .linkLocal),
        ("fec0::1", .privateUse),
        ("ff02::1", .multicast),
        ("2001:db8::1", .documentation),
        ("2001::1", .reserved),
        ("100::1", .reserved),
        ("2606:4700:4700::1111", .global),
        ("2a00:1450:4001:80b::200e", .global),
    ])
    func classifies(address: String, expected: AddressPolicy.Category) throws {
        let parsed = try #require(IPAddress(address))
        #expect(AddressPolicy.category(of: parsed) == expected)
        #expect(AddressPolicy(allowPrivateNetworks: false).allows(parsed) == (expected == .global))
        #expect(AddressPolicy(allowPrivateNetworks: true).allows(parsed))
    }

    @Test func parsesOnlyAddresses() {
        #expect(IPAddress("localhost") == nil)
        #expect(IPAddress("") == nil)
        #expect(IPAddress("1.2.3") == nil)
        #expect(IPAddress("10.0.0.1") == .v4(0x0a00_0001))
        #expect(IPAddress("::1") == .v6(high: 0, low: 1))
        #expect(IPAddress("10.0.0.1")?.description == "10.0.0.1")
    }
}
