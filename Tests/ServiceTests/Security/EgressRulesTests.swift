@testable import DownloaderEngine
import Testing

/// `--allow-host` / `--deny-host` entries and the verdicts they give (pure; no connection).
@Suite struct EgressRulesTests {
    static func rule(_ text: String) throws -> EgressRule { try EgressRule.parse(text).get() }

    static func rules(private allowPrivate: Bool = false, allow: [String] = [], deny: [String] = []) throws -> EgressRules {
        try EgressRules(allowPrivateNetworks: allowPrivate, allow: allow, deny: deny)
    }

    @Test(arguments: [
        ("origin.example.com", EgressRule.Target.name("origin.example.com"), nil as Int?),
        ("Origin.Example.COM.", .name("origin.example.com"), nil),
        ("*.example.com", .below(".example.com"), nil),
        ("localhost:8080", .name("localhost"), 8080),
        ("10.0.0.0/8", .network(IPNetwork(address: .v4(0x0a00_0000), prefixLength: 8)!), nil),
        ("10.1.2.3/8", .network(IPNetwork(address: .v4(0x0a00_0000), prefixLength: 8)!), nil),
        ("192.168.1.7", .network(IPNetwork(single: .v4(0xc0a8_0107))), nil),
        ("0x7f000001:9000", .network(IPNetwork(single: .v4(0x7f00_0001))), 9000),
        ("fc00::/7", .network(IPNetwork(address: IPAddress("fc00::")!, prefixLength: 7)!), nil),
        ("[::1]:81", .network(IPNetwork(single: IPAddress("::1")!)), 81),
        ("2001:db8::1", .network(IPNetwork(single: IPAddress("2001:db8::1")!)), nil),
    ])
    func parsesEntries(text: String, target: EgressRule.Target, port: Int?) throws {
        let rule = try Self.rule(text)
        #expect(rule.target == target)
        #expect(rule.port == port)
        #expect(rule.description == text)
    }

    @Test(arguments: ["", "exa mple.com", "10.0.0.0/33", "fc00::/129", "10.0.0.0/x", "host:0", "host:70000",
                      "host:port", "[::1", "[::1]x", "*.", "a..b", "http://example.com", "under/score"])
    func refusesBadEntries(text: String) {
        guard case .failure(let error) = EgressRule.parse(text) else {
            Issue.record("'\(text)' should not parse")
            return
        }
        #expect(error.message.contains("host rule"))
        #expect(EngineConfiguration.validateHostRules(["ok.example", text]) != nil)
    }

    @Test func namesMatchExactlyOrBelowASuffix() throws {
        let exact = try Self.rule("origin.example.com")
        #expect(exact.matches(name: "origin.example.com", port: 80))
        #expect(!exact.matches(name: "evil-origin.example.com", port: 80))
        #expect(!exact.matches(name: "origin.example.com.evil.net", port: 80))
        let below = try Self.rule("*.example.com")
        #expect(below.matches(name: "a.example.com", port: 443))
        #expect(below.matches(name: "b.a.example.com", port: 443))
        #expect(!below.matches(name: "example.com", port: 443))
        #expect(!below.matches(name: "badexample.com", port: 443))
        let withPort = try Self.rule("localhost:8080")
        #expect(withPort.matches(name: "localhost", port: 8080))
        #expect(!withPort.matches(name: "localhost", port: 8081))
    }

    @Test func networksMatchTheirAddressesAndEmbeddedForms() throws {
        let tenEight = try Self.rule("10.0.0.0/8")
        #expect(tenEight.matches(address: IPAddress("10.200.1.1")!, port: 1))
        #expect(!tenEight.matches(address: IPAddress("11.0.0.1")!, port: 1))
        #expect(tenEight.matches(address: IPAddress("::ffff:10.0.0.1")!, port: 1))
        #expect(tenEight.matches(address: IPAddress("64:ff9b::a00:1")!, port: 1))
        #expect(!tenEight.matches(address: IPAddress("2002:a00:1::")!, port: 1))
        #expect(tenEight.matches(address: IPAddress("2002:a00:1::")!, port: 1, viaEmbedded: true))
        let ula = try Self.rule("fc00::/7")
        #expect(ula.matches(address: IPAddress("fd00::5")!, port: 1))
        #expect(!ula.matches(address: IPAddress("fe80::1")!, port: 1))
        #expect(!ula.matches(address: IPAddress("10.0.0.1")!, port: 1))
        let all = try Self.rule("0.0.0.0/0")
        #expect(all.matches(address: IPAddress("203.0.113.1")!, port: 1))
    }

    @Test func denyAlwaysWins() throws {
        let rules = try Self.rules(private: true, allow: ["10.0.0.0/8", "*.corp.example"], deny: ["10.9.0.0/16", "secret.corp.example"])
        #expect(rules.admit(host: nil, port: 80, address: IPAddress("10.1.0.1")!) == .allowed)
        #expect(rules.admit(host: nil, port: 80, address: IPAddress("10.9.0.1")!) == .forbidden("10.9.0.1 is denied (rule 10.9.0.0/16)"))
        #expect(rules.admit(host: nil, port: 80, address: IPAddress("::ffff:10.9.0.1")!)
                == .forbidden("::ffff:10.9.0.1 is denied (rule 10.9.0.0/16)"))
        #expect(rules.screen(host: "secret.corp.example", port: 443) == .forbidden("secret.corp.example is denied (rule secret.corp.example)"))
        #expect(rules.screen(host: "wiki.corp.example", port: 443) == .allowed)
        // An allowed name that resolves into a denied network is still refused at connect time.
        #expect(rules.admit(host: "wiki.corp.example", port: 443, address: IPAddress("10.9.1.1")!)
                == .forbidden("10.9.1.1 is denied (rule 10.9.0.0/16)"))
        // Deny rules also cover addresses in public space and names without an allow list.
        let denyOnly = try Self.rules(deny: ["203.0.113.0/24", "*.tracker.example"])
        #expect(denyOnly.admit(host: nil, port: 80, address: IPAddress("203.0.113.9")!) == .forbidden("203.0.113.9 is denied (rule 203.0.113.0/24)"))
        #expect(denyOnly.screen(host: "x.tracker.example", port: 80) == .forbidden("x.tracker.example is denied (rule *.tracker.example)"))
        #expect(denyOnly.screen(host: "8.8.4.4", port: 80) == .allowed)
    }

    @Test func allowListModeFetchesOnlyWhatItMatches() throws {
        let rules = try Self.rules(allow: ["downloads.example.com", "origin.internal:8443"])
        #expect(rules.isAllowList)
        #expect(rules.screen(host: "downloads.example.com", port: 443) == .allowed)
        #expect(rules.screen(host: "other.example.com", port: 443) == .forbidden("other.example.com port 443 is not on the allow list"))
        #expect(rules.screen(host: "origin.internal", port: 80) == .forbidden("origin.internal port 80 is not on the allow list"))
        #expect(rules.screen(host: "8.8.8.8", port: 443) == .forbidden("8.8.8.8 port 443 is not on the allow list"))
        // An allow entry lifts the private-range ban for what it matches.
        #expect(rules.admit(host: "origin.internal", port: 8443, address: IPAddress("10.0.0.7")!) == .allowed)
        #expect(rules.admit(host: "evil.example", port: 443, address: IPAddress("93.184.216.34")!)
                == .forbidden("evil.example (93.184.216.34) port 443 is not on the allow list"))
        // Unknown hop host: only address rules could allow it, and there are none.
        #expect(rules.admit(host: nil, port: 443, address: IPAddress("10.0.0.7")!) == .forbidden("10.0.0.7 port 443 is not on the allow list"))
    }

    @Test func allowListedNetworksLeaveNamesToConnectTime() throws {
        let rules = try Self.rules(allow: ["10.0.0.0/8"])
        #expect(rules.screen(host: "build.internal", port: 80) == .undecided)
        #expect(rules.screen(host: "10.2.3.4", port: 80) == .allowed)
        #expect(rules.screen(host: "11.2.3.4", port: 80) == .forbidden("11.2.3.4 port 80 is not on the allow list"))
        #expect(rules.admit(host: "build.internal", port: 80, address: IPAddress("10.2.3.4")!) == .allowed)
        #expect(rules.admit(host: "build.internal", port: 80, address: IPAddress("127.0.0.1")!)
                == .forbidden("build.internal (127.0.0.1) port 80 is not on the allow list"))
    }

    @Test func withoutRulesOnlyPublicAddressesPass() throws {
        let rules = try Self.rules()
        #expect(!rules.isAllowList)
        #expect(rules.admit(host: "localhost", port: 80, address: IPAddress("127.0.0.1")!) == .forbidden("127.0.0.1 is loopback"))
        #expect(rules.admit(host: "example.com", port: 80, address: IPAddress("93.184.216.34")!) == .allowed)
        #expect(try Self.rules(private: true).admit(host: "localhost", port: 80, address: IPAddress("127.0.0.1")!) == .allowed)
    }

    @Test func urlScreeningThrowsDestinationForbidden() throws {
        let rules = try Self.rules()
        #expect(throws: EngineError.destinationForbidden("")) { try rules.screen(url: "http://127.0.0.1:8080/x") }
        #expect(throws: EngineError.destinationForbidden("")) { try rules.screen(url: "http://[::ffff:127.0.0.1]/x") }
        try rules.screen(url: "http://localhost:8080/x")
        #expect(HopTarget(url: "https://Example.COM/x") == HopTarget(host: "example.com", port: 443))
        #expect(HopTarget(url: "http://[::1]:81/") == HopTarget(host: "::1", port: 81))
        #expect(HopTarget(url: "ftp://example.com/") == nil)
        #expect(HopTarget(url: "https://u:p@[::1]/") == HopTarget(host: "::1", port: 443))
    }

    /// The host screened is the host fetched: an IDN host in its punycode form, as the normaliser keeps it.
    @Test func anIDNHostIsScreenedInItsPunycodeForm() throws {
        #expect(HopTarget(url: "http://XN--bcher-kva.example:81/x") == HopTarget(host: "xn--bcher-kva.example", port: 81))
        let rules = try Self.rules(deny: ["xn--bcher-kva.example"])
        #expect(throws: EngineError.destinationForbidden("")) { try rules.screen(url: "http://xn--bcher-kva.example/x") }
        // A redirect may name the host in Unicode: read (by libcurl's libidn2, in a UTF-8 locale)
        // as the punycode host it is fetched as. In the C locale it could not be read at all.
        #expect(HopTarget(url: "http://bücher.example/x") == HopTarget(host: "xn--bcher-kva.example", port: 80))
    }

    /// A redirect's URL may hold characters the grammar refuses (libcurl keeps `|`, `{`, `^`, …
    /// unencoded in its effective URL): such a hop is read as libcurl reads it to connect, so a
    /// punycode host stays punycode (Foundation turned it into percent-encoded UTF-8, which no
    /// `xn--` rule matched) and every host keeps its port (a port-qualified rule still matches).
    @Test(arguments: [
        ("http://xn--bcher-kva.example:18081/a|b", "xn--bcher-kva.example", 18081),
        ("http://XN--bcher-kva.example./x|", "xn--bcher-kva.example", 80),
        ("http://xn--a.corp.example:18081/x|", "xn--a.corp.example", 18081),
        ("https://u:p@[::1]/x{y}", "::1", 443),
        ("http://127.0.0.1:81/a^b", "127.0.0.1", 81),
    ])
    func aHopOutsideTheGrammarIsReadAsLibcurlConnects(url: String, host: String, port: Int) throws {
        #expect(URLScanner.scan(url, allowingCredentials: true) == nil, "not the fallback")
        #expect(HopTarget(url: url) == HopTarget(host: host, port: port))
    }

    /// A hop whose host cannot be read is refused: the guard has no host or port to judge.
    @Test func anUnreadableHopIsRefused() throws {
        for url in ["http://exa mple.com/", "http://:80/x|", "gopher://example.com/x|", "http://example.com:99999/x|"] {
            #expect(HopTarget(url: url) == nil, "\(url)")
        }
        // A host libcurl can only read in Unicode (the process's locale cannot convert it) is unreadable too.
        if let hop = HopTarget(url: "http://b\u{FC}cher.example/x") { #expect(hop.host == "xn--bcher-kva.example") }
        let proxy = try UpstreamProxy.parse("http://127.0.0.1:3128").get()
        #expect(HopRoute.plan(url: "http://exa mple.com/", proxy: proxy, noProxy: NoProxyList(), egress: try Self.rules())
                == .refused("the URL's host and port cannot be read"))
    }
}
