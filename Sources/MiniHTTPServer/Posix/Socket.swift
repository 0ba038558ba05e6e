import Basics
import CLinux
import Foundation

/// Thin, non-owning helpers over socket file descriptors, through Basics' syscall wrapper (EINTR
/// retried, EAGAIN as `.wouldBlock`, failures as `SystemError`). All sockets are non-blocking.
enum Socket {
    /// Creates a non-blocking listening TCP socket bound to `host:port`; returns the fd and the bound
    /// port. `host` is an IPv4 or IPv6 address; an IPv6 socket also accepts IPv4 (`IPV6_V6ONLY` off,
    /// whatever the system's `bindv6only`), so `::` listens on both.
    static func listen(host: String, port: Int, backlog: Int) throws(SystemError) -> (fd: Int32, port: Int) {
        var address = sockaddr_storage()
        let length: socklen_t
        let family: Int32
        if host.contains(":") {
            family = AF_INET6
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            var v6 = sockaddr_in6()
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = UInt16(truncatingIfNeeded: port).bigEndian
            guard inet_pton(AF_INET6, host, &v6.sin6_addr) == 1 else { throw SystemError(errno: EINVAL, function: "inet_pton(\(host))") }
            withUnsafeMutableBytes(of: &address) { raw in withUnsafeBytes(of: &v6) { raw.copyMemory(from: $0) } }
        } else {
            family = AF_INET
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            var v4 = sockaddr_in()
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = UInt16(truncatingIfNeeded: port).bigEndian
            guard inet_pton(AF_INET, host, &v4.sin_addr) == 1 else { throw SystemError(errno: EINVAL, function: "inet_pton(\(host))") }
            withUnsafeMutableBytes(of: &address) { raw in withUnsafeBytes(of: &v4) { raw.copyMemory(from: $0) } }
        }
        let fd = try syscall("socket") {
            socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
        do {
            var one: Int32 = 1
            var zero: Int32 = 0
            try syscall("setsockopt(SO_REUSEADDR)") {
                setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            }
            if family == AF_INET6 {
                try syscall("setsockopt(IPV6_V6ONLY)") {
                    setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &zero, socklen_t(MemoryLayout<Int32>.size))
                }
            }
            try syscall("bind") {
                withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
            }
            try syscall("listen") { Glibc.listen(fd, Int32(clamping: backlog)) }
            var bound = sockaddr_storage()
            var boundLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
            try syscall("getsockname") {
                withUnsafeMutablePointer(to: &bound) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &boundLength) }
                }
            }
            return (fd, Int(describe(bound).port))
        } catch {
            close(fd)
            throw error
        }
    }

    /// Accepts one connection (non-blocking, close-on-exec); nil when none is pending.
    static func accept(_ listener: Int32) throws(SystemError) -> (fd: Int32, remote: String)? {
        var addr = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = try nonBlockingSyscall("accept4") {
            withUnsafeMutablePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    accept4(listener, $0, &len, Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
                }
            }
        }
        guard case .processed(let fd) = result else { return nil }
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        return (fd, describe(addr).text)
    }

    /// `1.2.3.4:80` or `[2001:db8::1]:80`; an IPv4 client of a dual-stack listener (`::ffff:1.2.3.4`)
    /// is shown as IPv4, so it is the same client whichever listener it reached.
    static func describe(_ storage: sockaddr_storage) -> (text: String, port: UInt16) {
        let family = Int32(storage.ss_family)
        var storage = storage
        return withUnsafeBytes(of: &storage) { raw -> (String, UInt16) in
            var buf = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            switch family {
            case AF_INET6:
                var v6 = raw.loadUnaligned(as: sockaddr_in6.self)
                let port = UInt16(bigEndian: v6.sin6_port)
                let bytes = withUnsafeBytes(of: &v6.sin6_addr) { Array($0) }
                if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff {
                    return ("\(bytes[12]).\(bytes[13]).\(bytes[14]).\(bytes[15]):\(port)", port)
                }
                inet_ntop(AF_INET6, &v6.sin6_addr, &buf, socklen_t(INET6_ADDRSTRLEN))
                return ("[\(Self.text(buf))]:\(port)", port)
            default:
                var v4 = raw.loadUnaligned(as: sockaddr_in.self)
                let port = UInt16(bigEndian: v4.sin_port)
                inet_ntop(AF_INET, &v4.sin_addr, &buf, socklen_t(INET6_ADDRSTRLEN))
                return ("\(Self.text(buf)):\(port)", port)
            }
        }
    }

    private static func text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Reads into `buffer`; `.processed(0)` means the peer closed its side.
    static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> IOResult<Int> {
        try nonBlockingSyscall("recv") { recv(fd, buffer.baseAddress, buffer.count, 0) }
    }

    /// Sends bytes without raising SIGPIPE.
    static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemError) -> IOResult<Int> {
        try nonBlockingSyscall("send") { Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Sends up to `count` bytes of `file` from `offset` (advanced) with sendfile(2).
    static func sendfile(_ fd: Int32, file: Int32, offset: inout off_t, count: Int) throws(SystemError) -> IOResult<Int> {
        try nonBlockingSyscall("sendfile") { CLinux.sendfile(fd, file, &offset, count) }
    }
}
