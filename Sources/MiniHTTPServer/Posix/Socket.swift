import Basics
import CLinux
import Foundation

/// Thin, non-owning helpers over socket file descriptors, through Basics' syscall wrapper (EINTR
/// retried, EAGAIN as `.wouldBlock`, failures as `SystemError`). All sockets are non-blocking.
enum Socket {
    /// Creates a non-blocking listening TCP socket bound to `host:port`; returns the fd and the bound port.
    static func listen(host: String, port: Int, backlog: Int) throws(SystemError) -> (fd: Int32, port: Int) {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = UInt16(truncatingIfNeeded: port).bigEndian
        guard inet_pton(AF_INET, host, &addr.sin_addr) == 1 else {
            throw SystemError(errno: EINVAL, function: "inet_pton(\(host))")
        }
        let fd = try syscall("socket") {
            socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
        do {
            var one: Int32 = 1
            try syscall("setsockopt(SO_REUSEADDR)") {
                setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            }
            try syscall("bind") {
                withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
            }
            try syscall("listen") { Glibc.listen(fd, Int32(clamping: backlog)) }
            var bound = sockaddr_in()
            var len = socklen_t(MemoryLayout<sockaddr_in>.size)
            try syscall("getsockname") {
                withUnsafeMutablePointer(to: &bound) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
                }
            }
            return (fd, Int(UInt16(bigEndian: bound.sin_port)))
        } catch {
            close(fd)
            throw error
        }
    }

    /// Accepts one connection (non-blocking, close-on-exec); nil when none is pending.
    static func accept(_ listener: Int32) throws(SystemError) -> (fd: Int32, remote: String)? {
        var addr = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
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
        return (fd, describe(addr))
    }

    static func describe(_ addr: sockaddr_in) -> String {
        var a = addr.sin_addr
        var buf = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        inet_ntop(AF_INET, &a, &buf, socklen_t(INET_ADDRSTRLEN))
        let text = String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return "\(text):\(UInt16(bigEndian: addr.sin_port))"
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
