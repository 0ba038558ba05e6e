import Testing
@testable import DownloaderEngine

/// Which redirect hops get a caller's headers: the request URL's scheme, host and port only (pure).
@Suite struct CredentialScopeTests {
    @Test(arguments: [
        ("http://o.test/a", "http://o.test/b?x=1", true),
        ("http://O.TEST:80/a", "http://o.test/b", true),
        ("https://o.test/a", "https://o.test:443/b", true),
        ("http://o.test/a", "https://o.test/a", false),
        ("http://o.test/a", "http://o.test:8080/a", false),
        ("http://o.test/a", "http://cdn.o.test/a", false),
        ("http://127.0.0.1:9/a", "http://localhost:9/a", false),
        ("http://[::1]:9/a", "http://[::1]:9/b", true),
        ("http://o.test/a", "ftp://o.test/a", false),
    ])
    func sameOrigin(origin: String, hop: String, sends: Bool) {
        #expect(CredentialScope.sameOrigin(hop, origin) == sends)
    }
}
