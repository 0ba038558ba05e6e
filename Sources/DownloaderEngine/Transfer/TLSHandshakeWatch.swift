import CTLS
import Synchronization

/// A fatal TLS alert seen while a handshake was still running.
struct TLSAlert: Sendable, Equatable {
    /// True when this side sent it (it refused the peer), false when the peer did.
    var sent: Bool
    /// OpenSSL's long description, e.g. "protocol version", "handshake failure".
    var description: String
    /// The alert only reports that the peer closed the connection mid-handshake (a reset in effect).
    var causedByEOF: Bool

    /// A lasting refusal (version or cipher, a bad handshake message) rather than a dropped connection.
    var isLasting: Bool { !causedByEOF }
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
            guard let ssl, kind & ctls_cb_alert() != 0, value >> 8 == 2 /* fatal */, SSL_is_init_finished(ssl) == 0,
                  let context = SSL_get_SSL_CTX(ssl) else { return }
            let sent = kind & ctls_cb_write() != 0
            let alert = TLSAlert(sent: sent, description: String(cString: SSL_alert_desc_string_long(value)),
                                 causedByEOF: sent && ctls_last_error_reason() == ctls_reason_unexpected_eof())
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
