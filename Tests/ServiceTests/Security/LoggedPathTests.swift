import Foundation
import MiniHTTPServer
import Synchronization
import Testing
@testable import DownloadService

/// What the access log writes of a request's path: never a caller token or URL credentials.
@Suite struct LoggedPathTests {
    @Test(arguments: [
        ("DELETE", "/downloads/38b0305b63f27440e8c22f7e63325cfc", "/downloads/{token}"),
        ("DELETE", "/downloads/anything", "/downloads/{token}"),
        ("DELETE", "/downloads/38b0305b63f27440e8c22f7e63325cfc/", "/downloads/{token}"),
        ("DELETE", "/downloads/38b0305b63f27440e8c22f7e63325cfc/x", "/downloads/{token}"),
        ("DELETE", "http://127.0.0.1:8080/downloads/38b0305b63f27440e8c22f7e63325cfc", "/downloads/{token}"),
        ("DELETE", "http://127.0.0.1:8080/admin/downloads/0123456789abcdef", "http://127.0.0.1:8080/admin/downloads/0123456789abcdef"),
        ("GET", "/downloads/0123456789abcdef", "/downloads/0123456789abcdef"),
        ("GET", "/downloads/0123456789abcdef/progress", "/downloads/0123456789abcdef/progress"),
        ("GET", "/downloads/", "/downloads/"),
        // A client following the `cancel` link with another method, or the method misspelt.
        ("GET", "/downloads/38b0305b63f27440e8c22f7e63325cfc", "/downloads/{token}"),
        ("HEAD", "/downloads/38b0305b63f27440e8c22f7e63325cfc", "/downloads/{token}"),
        ("delete", "/downloads/38b0305b63f27440e8c22f7e63325cfc", "/downloads/{token}"),
        ("GET", "http://127.0.0.1:8080/downloads/38b0305b63f27440e8c22f7e63325cfc", "/downloads/{token}"),
        ("DELETE", "/admin/downloads/0123456789abcdef", "/admin/downloads/0123456789abcdef"),
        ("GET", "/downloads/x/file", "/downloads/x/file"),
        ("GET", "http://u:AbsFormPW@127.0.0.1:18780/healthz", "http://***@127.0.0.1:18780/healthz"),
        ("GET", "http://127.0.0.1/healthz", "http://127.0.0.1/healthz"),
        ("GET", "", ""),
    ])
    func shown(method: String, path: String, logged: String) {
        #expect(LoggedPath.shown(method: method, path: path) == logged)
    }

    @Test func theAccessLogWritesTheShownPath() {
        let lines = Mutex<[String]>([])
        let logger = Logger { line in lines.withLock { $0.append(line) } }
        let token = "38b0305b63f27440e8c22f7e63325cfc"
        logger.request(AccessLogEntry(method: "DELETE", path: "/downloads/\(token)", status: 404, bytes: 80,
                                      durationSeconds: 0.001, remoteAddress: "127.0.0.1"))
        let written = lines.withLock { $0 }
        #expect(written.count == 1 && !written[0].contains(token) && written[0].contains("/downloads/{token}"))
    }
}
