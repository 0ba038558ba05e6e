import Basics
import CCurl

// Starting each hop of an attempt (loop thread): routed directly or through the upstream proxy,
// after a lookup of its own when the proxy must be told a vetted address (`HopRoute`).
extension CurlMultiLoop {
    /// Plans the transfer's current hop and starts it, or starts its lookup.
    func startHop(_ transfer: CurlTransfer, in multi: UnsafeMutableRawPointer) {
        let settings = transfer.settings
        let plan = HopRoute.plan(url: transfer.hopURL, proxy: settings.proxy, noProxy: settings.noProxy, egress: transfer.egress)
        transfer.tunnelFallbacks = []
        guard case .lookup(let host, let port) = plan else {
            route(transfer, plan, in: multi)
            return
        }
        transfer.deadlines?.connecting(at: monotonicNanoseconds(), ownLookup: true)
        settings.resolver.resolve(host, port: port) { [weak self] addresses in
            self?.lookedUp(transfer, addresses: addresses, host: host, port: port)
        }
    }

    /// Routes a hop whose host's `addresses` are known: tunnelled to the first the guard admits,
    /// the others kept to fall back to.
    func routeLookedUp(_ transfer: CurlTransfer, _ addresses: [IPAddress], host: String, port: Int,
                       in multi: UnsafeMutableRawPointer) {
        let egress = transfer.egress
        let plan = HopRoute.choose(addresses, host: host, port: port, egress: egress)
        if case .tunnel = plan { transfer.tunnelFallbacks = Array(HopRoute.admitted(addresses, host: host, port: port, egress: egress).dropFirst()) }
        route(transfer, plan, in: multi)
    }

    /// Acts on a hop's route: a new easy handle in the multi, or the attempt's end.
    func route(_ transfer: CurlTransfer, _ route: HopRoute, in multi: UnsafeMutableRawPointer) {
        switch route {
        case .direct, .tunnel:
            addEasy(transfer, route: route, in: multi)
        case .refused(let reason):
            transfer.refusedAddress = reason
            finish(transfer, .failure(TransferFailure(.blockedAddress, "destination forbidden: \(reason)")), in: multi)
        case .unresolved(let message):
            finish(transfer, .failure(TransferFailure(.connection, message)), in: multi)
        case .lookup:
            startHop(transfer, in: multi)  // Not produced by `choose`; plan again.
        }
    }

    private func addEasy(_ transfer: CurlTransfer, route: HopRoute, in multi: UnsafeMutableRawPointer) {
        if transfer.isCancelled {
            finish(transfer, .failure(TransferFailure(.cancelled, "cancelled")), in: multi)
            return
        }
        guard let easy = curl_easy_init(), let context = transfer.context else {
            finish(transfer, .failure(TransferFailure(.connection, "curl_easy_init failed")), in: multi)
            return
        }
        transfer.easy = easy
        transfer.route = route
        transfer.admittedAddresses = 0
        if let failure = transfer.configure(easy, context: context.toOpaque()) {
            finish(transfer, .failure(failure), in: multi)
            return
        }
        let added = curl_multi_add_handle(multi, easy)
        guard added == CURLM_OK else {
            let message = String(cString: curl_multi_strerror(added))
            finish(transfer, .failure(TransferFailure(.connection, "curl_multi_add_handle: \(message)")), in: multi)
            return
        }
    }

    /// Removes and frees the current hop's easy handle (and its route list), if any.
    func releaseEasy(_ transfer: CurlTransfer, in multi: UnsafeMutableRawPointer) {
        if let easy = transfer.easy {
            _ = curl_multi_remove_handle(multi, easy)  // Harmless for a handle that was never added.
            curl_easy_cleanup(easy)
            transfer.easy = nil
        }
        if let list = transfer.connectToList {
            curl_slist_free_all(list)
            transfer.connectToList = nil
        }
    }
}
