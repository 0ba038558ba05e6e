// Re-exported for the whole test target: socket constants such as MSG_NOSIGNAL come from CLinux,
// and files that use them without importing it otherwise compile only by batching luck.
@_exported import CLinux
import Glibc

/// Blocking POSIX socket calls for `TestOrigin` (plain sockets, one thread per connection).
/// Every call retries EINTR; failures come back as `nil`/`false`, since the origin only ever drops
/// the connection when something goes wrong.
enum OriginSocket {
    /// A listening TCP socket on 127.0.0.1 with a kernel-chosen port.
    static func listenOnLoopback(backlog: Int32 = 128) throws -> (fd: Int32, port: UInt16) {
        try listen(on: "127.0.0.1", port: 0, backlog: backlog)
    }

    /// A loopback listener that never accepts, its accept queue filled by three connections: further
    /// SYNs are dropped, so a connect to `port` hangs until the client's connect timeout. Close
    /// `descriptors` (the listener and the fillers) when done.
    static func silentListenerWithFullQueue() throws -> (port: UInt16, descriptors: [Int32]) {
        let (listener, port) = try listenOnLoopback(backlog: 0)
        var descriptors = [listener]
        for _ in 0..<3 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            _ = connectToLoopback(fd, port: port)
            descriptors.append(fd)
        }
        return (port, descriptors)
    }

    /// A listening TCP socket on `address` (IPv4 or IPv6, e.g. "127.0.0.2", "::1") and `port` (0: the
    /// kernel chooses); the port it got.
    static func listen(on address: String, port: UInt16, backlog: Int32 = 128) throws -> (fd: Int32, port: UInt16) {
        let family = address.contains(":") ? AF_INET6 : AF_INET
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw OriginError("socket: errno \(errno)") }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if family == AF_INET6 { _ = setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size)) }
        guard bind(fd, address: address, port: port) == 0, Glibc.listen(fd, backlog) == 0 else {
            let code = errno
            close(fd)
            throw OriginError("bind/listen \(address):\(port): errno \(code)")
        }
        guard let bound = localPort(fd) else {
            close(fd)
            throw OriginError("getsockname: errno \(errno)")
        }
        return (fd, bound)
    }

    /// bind(2) to `address`:`port`; bind's result (0, or -1 with errno set).
    static func bind(_ fd: Int32, address: String, port: UInt16) -> Int32 {
        if address.contains(":") {
            var v6 = sockaddr_in6()
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = port.bigEndian
            guard inet_pton(AF_INET6, address, &v6.sin6_addr) == 1 else { errno = EINVAL; return -1 }
            return withUnsafePointer(to: &v6) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        }
        var v4 = sockaddr_in()
        v4.sin_family = sa_family_t(AF_INET)
        v4.sin_port = port.bigEndian
        guard inet_pton(AF_INET, address, &v4.sin_addr) == 1 else { errno = EINVAL; return -1 }
        return withUnsafePointer(to: &v4) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    /// 127.0.0.1:`port` as a socket address.
    static func loopbackAddress(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr = in_addr(s_addr: UInt32(0x7f00_0001).bigEndian)
        return address
    }

    /// bind(2) to 127.0.0.1:`port` (0: the kernel chooses); bind's result (0, or -1 with errno set).
    static func bindToLoopback(_ fd: Int32, port: UInt16) -> Int32 {
        var address = loopbackAddress(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    /// connect(2) to 127.0.0.1:`port`; connect's result (0, or -1 with errno set, EINPROGRESS for a
    /// non-blocking socket).
    static func connectToLoopback(_ fd: Int32, port: UInt16) -> Int32 {
        var address = loopbackAddress(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    /// The local port of a bound socket, IPv4 or IPv6 (getsockname(2)); nil on failure (errno set).
    static func localPort(_ fd: Int32) -> UInt16? {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { return nil }
        return withUnsafeBytes(of: &address) { raw in
            // sin_port and sin6_port sit at the same offset, right after the family.
            UInt16(bigEndian: raw.loadUnaligned(fromByteOffset: 2, as: UInt16.self))
        }
    }

    /// Accepts one connection; nil once the listening socket is shut down.
    static func accept(_ listener: Int32) -> Int32? {
        while true {
            let fd = CLinux.accept4(listener, nil, nil, Int32(SOCK_CLOEXEC.rawValue))
            if fd >= 0 { return fd }
            switch errno {
            case EINTR, ECONNABORTED: continue
            case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                usleep(10_000)  // Out of descriptors: back off briefly rather than spin.
                continue
            default: return nil
            }
        }
    }

    /// Sets a receive timeout so an idle client cannot hold a thread forever.
    static func setReceiveTimeout(_ fd: Int32, seconds: Int) {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Makes the coming close(2) send RST rather than FIN (SO_LINGER on, zero seconds).
    static func resetOnClose(_ fd: Int32) {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
    }

    /// Reads what is available (at least one byte); nil on EOF, error or timeout.
    static func receive(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        while true {
            let count = recv(fd, buffer.baseAddress, buffer.count, 0)
            if count > 0 { return count }
            if count < 0 && errno == EINTR { continue }
            return nil
        }
    }

    /// Sends all of `bytes`; false if the peer went away.
    static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let count = Glibc.send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            if count > 0 {
                offset += count
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                return false
            }
        }
        return true
    }

    static func send(_ fd: Int32, _ text: String) -> Bool {
        var text = text
        return text.withUTF8 { send(fd, UnsafeRawBufferPointer($0)) }
    }

    /// Waits up to `milliseconds` for the peer to send something or hang up; true if it hung up
    /// (or the socket was shut down).
    static func peerClosed(_ fd: Int32, withinMilliseconds milliseconds: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&entry, 1, milliseconds)
        guard ready > 0 else { return false }
        if entry.revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 { return true }
        var scratch = [UInt8](repeating: 0, count: 4096)
        let count = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        return count == 0 || (count < 0 && errno != EAGAIN && errno != EINTR)
    }
}

struct OriginError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
