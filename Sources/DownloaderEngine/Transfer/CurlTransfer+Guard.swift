import CCurl

// The SSRF guard's checks during an attempt (loop thread, from libcurl's callbacks).
extension CurlTransfer {
    /// The SSRF check for an address libcurl is about to connect to (or reuse a connection to), on
    /// the current hop (its host from libcurl's effective URL, which follows redirects).
    func admits(_ address: IPAddress?, shown: String) -> Bool {
        if isTunnelled { return true }  // The proxy's address; the origin's was vetted before the tunnel.
        let verdict: EgressRules.Verdict
        if let address {
            // A hop whose URL cannot be read has no host and port for the name and port rules.
            verdict = currentHop().map { egress.admit(host: $0.host, port: $0.port, address: address) } ?? Self.unreadableHop
        } else {
            verdict = .forbidden("\(shown.isEmpty ? "an unknown address" : shown) is not an IPv4 or IPv6 address")
        }
        guard case .forbidden(let reason) = verdict else {
            admittedAddresses += 1
            return true
        }
        refusedAddress = reason
        return false
    }

    /// Before a name lookup: false (and the attempt refused) when the hop's host is refused by
    /// name already (a deny rule, or not on the allow list); addresses are judged at connect time.
    func screensHopHost() -> Bool {
        if isTunnelled { return true }  // libcurl looks up the proxy's name.
        guard case .forbidden(let reason) = currentHop().map({ egress.screen(host: $0.host, port: $0.port) }) ?? Self.unreadableHop else {
            return true
        }
        refusedAddress = reason
        refuseConnection()
        return false
    }

    static let unreadableHop = EgressRules.Verdict.forbidden("the URL's host and port cannot be read")

    /// The host and port of the hop libcurl is working on; nil when it cannot be read.
    func currentHop() -> HopTarget? {
        var urlPointer: UnsafeMutablePointer<CChar>?
        guard let easy, ccurl_getinfo_string(easy, CURLINFO_EFFECTIVE_URL, &urlPointer) == CURLE_OK,
              let urlPointer else { return HopTarget(url: hopURL) }
        return HopTarget(url: String(cString: urlPointer))
    }

    /// A reused or new connection's peer is refused: abort with `.blockedAddress`.
    func refuseConnection() {
        let reason = refusedAddress ?? "refused"
        abortReason = abortReason ?? TransferFailure(.blockedAddress, "destination forbidden: \(reason)")
    }

}
