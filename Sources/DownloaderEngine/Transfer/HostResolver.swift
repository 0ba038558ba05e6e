import Foundation
import Glibc
import Synchronization

/// Resolves host names for hops that go through the upstream proxy (the transfer vets the
/// addresses itself before the proxy is told where to connect).
protocol HostResolver: Sendable {
    /// Calls `done` once, on some other thread, with the addresses of `host` in the system's order
    /// (empty when it has none or the lookup failed).
    func resolve(_ host: String, port: Int, done: @escaping @Sendable ([IPAddress]) -> Void)
}

/// `getaddrinfo` (the system's resolver: /etc/hosts, DNS) on at most `width` threads at a time.
///
/// A lookup cannot be cancelled and may block for the resolver's whole timeout, so one name that
/// does not answer must not hold every thread: concurrent lookups of one host and port share one
/// call (the many attempts of a burst on one origin take one thread), and the width leaves room for
/// other names beside a few that hang. Lookups wait in an `OperationQueue`; there are never more
/// of them than distinct hosts of the transfers running.
final class SystemResolver: HostResolver {
    typealias Lookup = @Sendable (_ host: String, _ port: Int) -> [IPAddress]

    private let queue: OperationQueue
    private let lookup: Lookup
    /// The callers waiting for each lookup under way, by host and port.
    private let waiting = Mutex<[String: [@Sendable ([IPAddress]) -> Void]]>([:])

    init(width: Int = 16, lookup: @escaping Lookup = SystemResolver.addresses(of:port:)) {
        queue = OperationQueue()
        queue.name = "host-resolver"
        queue.maxConcurrentOperationCount = max(1, width)
        self.lookup = lookup
    }

    func resolve(_ host: String, port: Int, done: @escaping @Sendable ([IPAddress]) -> Void) {
        let name = "\(port) \(host)"
        let first = waiting.withLock { waiting -> Bool in
            defer { waiting[name, default: []].append(done) }
            return waiting[name] == nil
        }
        guard first else { return }
        queue.addOperation { [self] in
            let addresses = lookup(host, port)
            let callers = waiting.withLock { $0.removeValue(forKey: name) ?? [] }
            for caller in callers { caller(addresses) }
        }
    }

    /// Every TCP address of `host`, duplicates dropped, in `getaddrinfo`'s order.
    static func addresses(of host: String, port: Int) -> [IPAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        // Any socket type (one entry per type; duplicates are dropped below). Naming SOCK_STREAM here
        // does not build in release: its header belongs to another C module of this target.
        hints.ai_socktype = 0
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else { return [] }
        defer { freeaddrinfo(first) }
        var found: [IPAddress] = []
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let current = entry {
            if let raw = current.pointee.ai_addr,
               let address = IPAddress(socketAddress: raw, length: Int(current.pointee.ai_addrlen)), !found.contains(address) {
                found.append(address)
            }
            entry = current.pointee.ai_next
        }
        return found
    }
}
