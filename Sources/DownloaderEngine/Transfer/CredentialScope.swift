import Foundation

/// Which redirect hops a caller's headers may go to: those with the request URL's scheme, host and
/// port (issue 15: never to another host after a redirect). Pure.
enum CredentialScope {
    static func sameOrigin(_ hop: String, _ origin: String) -> Bool {
        guard let a = Origin(hop), let b = Origin(origin) else { return false }
        return a == b
    }

    private struct Origin: Equatable {
        var scheme: String
        var target: HopTarget

        init?(_ url: String) {
            guard let target = HopTarget(url: url), let colon = url.firstIndex(of: ":") else { return nil }
            scheme = url[..<colon].lowercased()
            self.target = target
        }
    }
}
