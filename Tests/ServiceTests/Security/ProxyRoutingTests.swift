@testable import DownloaderEngine
import Testing

/// The upstream proxy's URL, the no-proxy list and each hop's route: pure.
@Suite struct ProxyRoutingTests {
    @Test func aProxyURLWithCredentialsIsShownRedacted() throws {
        let proxy = try UpstreamProxy.parse("http://alice:s%40cret@proxy.internal:3128").get()
        #expect(proxy.scheme == .http && proxy.host == "proxy.internal" && proxy.port == 3128)
        #expect(proxy.username == "alice" && proxy.password == "s@cret")
        #expect(proxy.address == "http://proxy.internal:3128")
        #expect(proxy.redacted == "http://***@proxy.internal:3128")
        #expect("\(proxy)" == "http://***@proxy.internal:3128")
    }

    @Test func proxyURLsDefaultTheirPortAndKeepIPv6InBrackets() throws {
        #expect(try UpstreamProxy.parse("https://proxy.internal").get().address == "https://proxy.internal:443")
        #expect(try UpstreamProxy.parse("http://[::1]:3128/").get().address == "http://[::1]:3128")
    }

    @Test(arguments: ["socks5://proxy:1080", "proxy:3128", "http://", "http://proxy:3128/path", "http://proxy:0",
                      "http://user:pw@proxy:3128?x=1"])
    func badProxyURLsAreRefusedWithoutEchoingThem(text: String) {
        guard case .failure(let error) = UpstreamProxy.parse(text) else {
            Issue.record("accepted \(text)")
            return
        }
        #expect(error.message.hasPrefix("upstream proxy: "))
        #expect(!error.message.contains("pw"))
    }

    @Test func theNoProxyListMatchesTheURLsHostAsWritten() throws {
        let list = try NoProxyList(["files.internal", "*.corp.example", "10.0.0.0/8", "[::1]", "localhost:8080"])
        #expect(list.bypasses(host: "files.internal", port: 80))
        #expect(list.bypasses(host: "FILES.internal.", port: 443))
        #expect(list.bypasses(host: "a.b.corp.example", port: 443))
        #expect(!list.bypasses(host: "corp.example", port: 443))
        #expect(list.bypasses(host: "10.1.2.3", port: 80))
        #expect(list.bypasses(host: "012.1.2.3", port: 80))  // 10.1.2.3 spelled in octal.
        #expect(list.bypasses(host: "[::1]", port: 80))
        #expect(list.bypasses(host: "localhost", port: 8080))
        #expect(!list.bypasses(host: "localhost", port: 80))
        #expect(!list.bypasses(host: "example.com", port: 80))
        #expect(throws: ProxyConfigurationError.self) { try NoProxyList(["not a host"]) }
    }

    static let proxy = try! UpstreamProxy.parse("http://127.0.0.1:3128").get()

    @Test func withoutAProxyOrForANoProxyHostTheHopIsDirect() throws {
        #expect(HopRoute.plan(url: "http://files.example/x", proxy: nil, noProxy: NoProxyList(), egress: EgressRules()) == .direct)
        let list = try NoProxyList(["files.example"])
        #expect(HopRoute.plan(url: "http://files.example/x", proxy: Self.proxy, noProxy: list, egress: EgressRules()) == .direct)
    }

    @Test func aNameIsLookedUpAndAnAddressIsVettedBeforeTheTunnel() {
        let rules = EgressRules()
        #expect(HopRoute.plan(url: "https://files.example/x", proxy: Self.proxy, noProxy: NoProxyList(), egress: rules)
                == .lookup(host: "files.example", port: 443))
        #expect(HopRoute.plan(url: "http://0x7f000001:8080/x", proxy: Self.proxy, noProxy: NoProxyList(), egress: rules)
                == .refused("127.0.0.1 is loopback"))
        #expect(HopRoute.plan(url: "http://93.184.216.34/x", proxy: Self.proxy, noProxy: NoProxyList(), egress: rules)
                == .tunnel(IPAddress("93.184.216.34")!))
    }

    @Test func theFirstAdmittedAddressIsChosenAndRefusalsAreNamed() throws {
        let rules = EgressRules()
        let mixed = [IPAddress("10.0.0.7")!, IPAddress("93.184.216.34")!, IPAddress("2606:2800:220:1::1")!]
        #expect(HopRoute.choose(mixed, host: "files.example", port: 443, egress: rules) == .tunnel(IPAddress("93.184.216.34")!))
        // The others the tunnel may fall back to: admitted ones only, in the resolver's order.
        #expect(HopRoute.admitted(mixed, host: "files.example", port: 443, egress: rules)
                == [IPAddress("93.184.216.34")!, IPAddress("2606:2800:220:1::1")!])
        #expect(HopRoute.choose([IPAddress("127.0.0.1")!, IPAddress("::1")!], host: "rebind.example", port: 80, egress: rules)
                == .refused("127.0.0.1 is loopback"))
        #expect(HopRoute.choose([], host: "nowhere.example", port: 80, egress: rules) == .unresolved("could not resolve host: nowhere.example"))
        let denying = try EgressRules(allowPrivateNetworks: true, allow: [], deny: ["*.internal"])
        #expect(HopRoute.plan(url: "http://db.internal/x", proxy: Self.proxy, noProxy: NoProxyList(), egress: denying)
                == .refused("db.internal is denied (rule *.internal)"))
    }

    @Test func theTunnelGoesToTheAddressWhateverTheHostIsCalled() {
        #expect(HopRoute.connectTo(IPAddress("127.0.0.1")!, port: 443) == "::127.0.0.1:443")
        #expect(HopRoute.connectTo(IPAddress("::1")!, port: 8443) == "::[::1]:8443")
    }
}
