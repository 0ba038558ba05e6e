import CTLS
import Synchronization

/// A fatal TLS alert seen while a handshake was still running, or received from the peer right
/// after this side finished it (TLS 1.3: a server that wants a client certificate says so then).
struct TLSAlert: Sendable, Equatable {
    /// True when this side sent it (it refused the peer), false when the peer did.
    var sent: Bool
    /// OpenSSL's long description, e.g. "protocol version", "handshake failure".
    var description: String
    /// The alert only reports that the peer closed the connection mid-handshake (a reset in effect).
    var causedByEOF: Bool
    /// Received once this side's handshake had finished.
    var afterHandshake = false
    /// The alert's number (RFC 8446 §6), e.g. 116 for certificate_required.
    var code: UInt8 = 0

    /// A lasting refusal (version or cipher, a bad handshake message) rather than a dropped connection.
    var isLasting: Bool { !causedByEOF }

    /// The peer refused this client itself (it wants a client certificate, or not this one):
    /// handshake_failure, bad_certificate, unsupported_certificate, certificate_unknown,
    /// unknown_ca, access_denied, certificate_required. Every try would be refused the same way.
    var refusesClient: Bool { !sent && [40, 42, 43, 46, 48, 49, 116].contains(code) }

    /// OpenSSL's long description of alert `code`, or the RFC's name where OpenSSL 3.0 has none
    /// ("unknown" for TLS 1.3's certificate_required).
    static func describe(_ code: UInt8, openSSL: String) -> String {
        guard openSSL == "unknown" else { return openSSL }
        switch code {
        case 109: return "missing extension"
        case 116: return "certificate required"
        case 120: return "no application protocol"
        default: return "alert \(code)"
        }
    }
}

/// Receives the fatal alerts of the handshakes it started (on the transfer thread).
protocol TLSAlertListener: AnyObject, Sendable {
    func tlsHandshake(sawFatalAlert alert: TLSAlert)
}

/// Tells a transfer about the fatal alerts of the TLS connections it opens, so that a handshake
/// the peer refused (`tls_handshake`, not retried) is told apart from one cut by a reset or a close
/// (a transient connection error). libcurl makes one `SSL_CTX` per connection and hands it to the
/// transfer's `SSL_CTX` callback, which calls `watch`; OpenSSL's info callback has only the `SSL *`
/// to go by, so the listener is found through its `SSL_CTX` in a table. A transfer leaves the table
/// when it ends (`forget`), so a connection that outlives it (kept for reuse) reports to nobody.
enum TLSHandshakeWatch {
    private struct Entry {
        weak var listener: (any TLSAlertListener)?
    }

    /// `SSL_CTX` address → the transfer that opened the connection. Bounded by the connections
    /// being set up by running transfers.
    private static let listeners = Mutex<[UInt: Entry]>([:])

    static func watch(_ context: OpaquePointer, for listener: any TLSAlertListener) {
        listeners.withLock { $0[UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(context)))] = Entry(listener: listener) }
        SSL_CTX_set_info_callback(context) { ssl, kind, value in
            guard let ssl, kind & ctls_cb_alert() != 0, value >> 8 == 2 /* fatal */, let context = SSL_get_SSL_CTX(ssl) else { return }
            let sent = kind & ctls_cb_write() != 0
            let finished = SSL_is_init_finished(ssl) != 0
            guard !finished || !sent else { return }  // This side's own alerts on a working connection.
            let code = UInt8(truncatingIfNeeded: value & 0xff)
            let alert = TLSAlert(sent: sent, description: TLSAlert.describe(code, openSSL: String(cString: SSL_alert_desc_string_long(value))),
                                 causedByEOF: sent && ctls_last_error_reason() == ctls_reason_unexpected_eof(),
                                 afterHandshake: finished, code: code)
            let key = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(context)))
            let listener = TLSHandshakeWatch.listeners.withLock { $0[key]?.listener }
            listener?.tlsHandshake(sawFatalAlert: alert)
        }
    }

    /// Forgets every connection `listener` opened.
    static func forget(_ contexts: [OpaquePointer], of listener: any TLSAlertListener) {
        guard !contexts.isEmpty else { return }
        listeners.withLock { table in
            for context in contexts {
                let key = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(context)))
                if let entry = table[key], entry.listener == nil || entry.listener === listener { table[key] = nil }
            }
        }
    }
}
