import CCurl
import Glibc

/// The libcurl options of one attempt and the C callbacks that route into `CurlTransfer`.
extension CurlTransfer {
    /// Read buffer per transfer: big reads keep CPU per byte low (measured: 512 KiB beats curl's default).
    static let bufferSize = 512 * 1024

    /// RFC 9110 `tchar`: what a header name may contain.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    /// Sets every option on `easy`; `context` is the retained pointer to `self` libcurl hands back.
    /// Returns a failure if the request cannot be expressed safely.
    func configure(_ easy: UnsafeMutableRawPointer, context: UnsafeMutableRawPointer) -> TransferFailure? {
        var failed: CURLcode = CURLE_OK
        func set(_ result: CURLcode) { if result != CURLE_OK && failed == CURLE_OK { failed = result } }
        func long(_ option: CURLoption, _ value: Int) { set(ccurl_setopt_long(easy, option, value)) }
        func text(_ option: CURLoption, _ value: String) { set(ccurl_setopt_string(easy, option, value)) }

        if headerList == nil, let failure = buildHeaderList() { return failure }
        text(CURLOPT_URL, hopURL)
        // An attempt ended (timed out, cancelled) while its name is being looked up does not wait
        // for the lookup's thread: libcurl would wait on the loop's thread, every other transfer's
        // (a nameserver that never answers held them all for the resolver's whole timeout).
        // libcurl 7.87+; an older one refusing it loses only that.
        _ = ccurl_setopt_long(easy, CURLOPT_QUICK_EXIT, 1)
        if request.method == .head { long(CURLOPT_NOBODY, 1) }
        set(ccurl_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList))
        text(CURLOPT_USERAGENT, request.userAgent)
        text(CURLOPT_PROTOCOLS_STR, "http,https")
        text(CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        // Never a proxy from *_proxy / no_proxy variables: only the configured one, for tunnelled hops.
        text(CURLOPT_NOPROXY, "")
        if case .tunnel(let address) = route, let proxy = settings.proxy, let port = HopTarget(url: hopURL)?.port {
            text(CURLOPT_PROXY, proxy.address)
            long(CURLOPT_HTTPPROXYTUNNEL, 1)  // CONNECT for http origins too: the request keeps its Host.
            long(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)  // The proxy's answer is not the origin's head.
            guard let list = curl_slist_append(nil, HopRoute.connectTo(address, port: port)) else {
                return TransferFailure(.connection, "out of memory for the proxy route")
            }
            connectToList = list
            set(ccurl_setopt_slist(easy, CURLOPT_CONNECT_TO, list))
            if proxy.username != nil || proxy.password != nil {
                text(CURLOPT_PROXYUSERNAME, proxy.username ?? "")
                text(CURLOPT_PROXYPASSWORD, proxy.password ?? "")
                long(CURLOPT_PROXYAUTH, 1)  // CURLAUTH_BASIC: Proxy-Authorization: Basic, sent at once.
            }
        } else {
            text(CURLOPT_PROXY, "")
        }
        // HTTP/2 when the origin offers it through ALPN (TLS only), else HTTP/1.1.
        long(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        // After a stall, not the cached connection (an HTTP/2 one outlives the stream it stalled).
        if request.freshConnection { long(CURLOPT_FRESH_CONNECT, 1) }
        // TLS: always verified (no option turns it off), 1.2 at least, for origins and proxies alike.
        long(CURLOPT_SSL_VERIFYPEER, 1)
        long(CURLOPT_SSL_VERIFYHOST, 2)
        long(CURLOPT_PROXY_SSL_VERIFYPEER, 1)
        long(CURLOPT_PROXY_SSL_VERIFYHOST, 2)
        long(CURLOPT_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2))
        long(CURLOPT_PROXY_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2))
        set(ccurl_setopt_pointer(easy, CURLOPT_SSL_CTX_DATA, context))
        set(ccurl_setopt_ssl_ctx_function(easy) { _, sslContext, context in
            guard let context, let sslContext else { return CURLE_OK }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
            transfer.prepareTLS(OpaquePointer(sslContext))
            return CURLE_OK
        })
        long(CURLOPT_FOLLOWLOCATION, followsRedirectsItself ? 0 : 1)
        long(CURLOPT_MAXREDIRS, max(0, request.maxRedirects))
        long(CURLOPT_CONNECTTIMEOUT_MS, max(1, Int(request.connectTimeout * 1000)))
        long(CURLOPT_BUFFERSIZE, Self.bufferSize)
        long(CURLOPT_NOSIGNAL, 1)
        long(CURLOPT_HTTP_CONTENT_DECODING, 0)  // Raw bytes: no Accept-Encoding is sent, none is decoded.
        long(CURLOPT_IGNORE_CONTENT_LENGTH, 1)
        long(CURLOPT_TCP_KEEPALIVE, 1)
        long(CURLOPT_TCP_KEEPIDLE, 30)
        long(CURLOPT_TCP_KEEPINTVL, 15)
        // No CURLOPT_MAXFILESIZE_LARGE: libcurl would fail on any hop's Content-Length (a 404's error
        // page included) before the head reaches us. `maxBodyBytes` is enforced on 2xx heads and bodies.
        set(ccurl_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer))
        set(ccurl_setopt_pointer(easy, CURLOPT_PRIVATE, context))

        set(ccurl_setopt_pointer(easy, CURLOPT_WRITEDATA, context))
        set(ccurl_setopt_write_function(easy) { data, size, count, context in
            guard let context else { return 0 }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
            let length = size * count
            return transfer.receiveBody(UnsafeRawBufferPointer(start: data, count: length)) ? length : 0
        })
        set(ccurl_setopt_pointer(easy, CURLOPT_HEADERDATA, context))
        set(ccurl_setopt_header_function(easy) { data, size, count, context in
            guard let context else { return 0 }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
            let length = size * count
            return transfer.receiveHeaderLine(UnsafeRawBufferPointer(start: data, count: length)) ? length : 0
        })
        // The SSRF guard: a hop whose host name is refused outright is not even resolved (called
        // before each name lookup libcurl does not answer from its cache)…
        set(ccurl_setopt_pointer(easy, CURLOPT_RESOLVER_START_DATA, context))
        set(ccurl_setopt_resolver_start_function(easy) { _, _, context in
            guard let context else { return 1 }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
            return transfer.screensHopHost() ? 0 : 1
        })
        // …on the real address libcurl connects to (after DNS, on every redirect hop)…
        set(ccurl_setopt_pointer(easy, CURLOPT_OPENSOCKETDATA, context))
        set(ccurl_setopt_opensocket_function(easy) { context, _, address in
            guard let context, let address, let raw = ccurl_sockaddr_address(address) else { return ccurl_socket_bad() }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
            let ip = IPAddress(socketAddress: raw, length: Int(address.pointee.addrlen))
            guard transfer.admits(ip, shown: ip?.description ?? "an address of family \(address.pointee.family)") else {
                return ccurl_socket_bad()
            }
            let fd = socket(address.pointee.family, address.pointee.socktype | Int32(SOCK_CLOEXEC.rawValue),
                            address.pointee.protocol)
            return fd >= 0 ? fd : ccurl_socket_bad()
        })
        // …and again before each request, which also covers a reused connection.
        set(ccurl_setopt_pointer(easy, CURLOPT_PREREQDATA, context))
        set(ccurl_setopt_prereq_function(easy) { context, primaryIP, _, _, _ in
            guard let context else { return 1 }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
            let shown = primaryIP.map { String(cString: $0) } ?? ""
            guard transfer.admits(IPAddress(shown), shown: shown) else {
                transfer.refuseConnection()
                return 1  // CURL_PREREQFUNC_ABORT
            }
            transfer.requestGoesOut()
            return 0  // CURL_PREREQFUNC_OK
        })

        guard failed == CURLE_OK else {
            return TransferFailure(.connection, "libcurl option failed: \(String(cString: curl_easy_strerror(failed)))",
                                   code: Int32(bitPattern: failed.rawValue))
        }
        return nil
    }

    /// The request's header fields, once per attempt, and again for each hop when there are caller
    /// credentials (which only hops to the request URL's origin get).
    private func buildHeaderList() -> TransferFailure? {
        // HTTP/1.x bodies end when the origin closes (libcurl drops the field over HTTP/2), so that
        // bytes sent past the announced Content-Length are seen (`CURLOPT_IGNORE_CONTENT_LENGTH`:
        // the transfer counts against Content-Length itself).
        let credentials = CredentialScope.sameOrigin(hopURL, request.url) ? request.credentials : []
        for header in request.headers + credentials + [(name: "Connection", value: "close")] {
            let line = "\(header.name): \(header.value)"
            guard !header.name.isEmpty, header.name.utf8.allSatisfy(Self.isTokenByte),
                  !header.value.utf8.contains(where: { $0 == 13 || $0 == 10 || $0 == 0 }) else {
                return TransferFailure(.rejected, "invalid request header \(header.name.debugDescription)")
            }
            guard let appended = curl_slist_append(headerList, line) else {
                return TransferFailure(.connection, "out of memory for request headers")
            }
            headerList = appended
        }
        return nil
    }
}
