// CCurl too: curl.h includes <sys/socket.h>, and with several C modules in this target (CCurl, CTLS,
// CSQLite) glibc's `SOCK_STREAM` enumerator can be owned by CCurl's module, visible only through it
// (the release build failed with "cannot find 'SOCK_STREAM'" once CSQLite was added).
import CCurl
import Foundation
import Glibc

/// Resolves host names for hops that go through the upstream proxy (the transfer vets the
/// addresses itself before the proxy is told where to connect).
protocol HostResolver: Sendable {
    /// Calls `done` once, on some other thread, with the addresses of `host` in the system's order
    /// (empty when it has none or the lookup failed).
    func resolve(_ host: String, port: Int, done: @escaping @Sendable ([IPAddress]) -> Void)
}

/// `getaddrinfo` (the system's resolver: /etc/hosts, DNS) on at most `width` threads at a time.
/// Lookups wait in an `OperationQueue`; there are never more than the transfers running.
final class SystemResolver: HostResolver {
    private let queue: OperationQueue

    init(width: Int = 4) {
        queue = OperationQueue()
        queue.name = "host-resolver"
        queue.maxConcurrentOperationCount = max(1, width)
    }

    func resolve(_ host: String, port: Int, done: @escaping @Sendable ([IPAddress]) -> Void) {
        queue.addOperation { done(Self.addresses(of: host, port: port)) }
    }

    /// Every TCP address of `host`, duplicates dropped, in `getaddrinfo`'s order.
    static func addresses(of host: String, port: Int) -> [IPAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
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
