@testable import DownloadService
@testable import DownloaderEngine
import Foundation
@testable import MiniHTTPServer
import Testing

/// The error codes the service can put on the wire are exactly the ones `openapi.yaml` lists:
/// `Failure.code` enumerates `DownloadFailure.Code`, and `Error.error.code` enumerates the
/// service's, the engine's and the HTTP layer's codes (schemathesis checks answers against both).
@Suite struct ErrorCodeContractTests {
    static let failurePath = ["components", "schemas", "Failure", "properties", "code", "enum"]
    static let errorPath = ["components", "schemas", "Error", "properties", "error", "properties", "code", "enum"]

    static func documented(_ path: [String]) throws -> [String] {
        try #require(try OpenAPIOutline.repositoryDocument().sequence(at: path), "no enum at \(path.joined(separator: "."))")
    }

    static func specText() throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        return try String(contentsOf: root.appendingPathComponent("openapi.yaml"), encoding: .utf8)
    }

    @Test func failureCodesAreExactlyTheDocumentedEnum() throws {
        let documented = try Self.documented(Self.failurePath)
        #expect(Set(documented).count == documented.count, "duplicates in \(documented)")
        #expect(Set(documented) == Set(DownloadFailure.Code.allCases.map(\.rawValue)))
        let spec = try Self.specText()
        for code in DownloadFailure.Code.allCases {
            #expect(spec.contains("- `\(code.rawValue)`: "), "Failure.code's description does not explain \(code.rawValue)")
        }
    }

    /// The codes of the HTTP server's own answers (`ServerErrorJSON.Code`), and any literal code left
    /// in the server's or the service's sources, found by a scan.
    static func httpLayerCodes() throws -> Set<String> {
        var codes = Set(ServerErrorJSON.Code.allCases.map(\.rawValue))
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let literal = try Regex(#"code: "([a-z_]+)"|"code":"([a-z_]+)""#)
        for directory in ["Sources/MiniHTTPServer", "Sources/DownloadService"] {
            let base = root.appendingPathComponent(directory)
            let files = try FileManager.default.subpathsOfDirectory(atPath: base.path).filter { $0.hasSuffix(".swift") }
            #expect(!files.isEmpty)
            for file in files {
                let text = try String(contentsOf: base.appendingPathComponent(file), encoding: .utf8)
                for match in text.matches(of: literal) {
                    if let code = (match.output[1].substring ?? match.output[2].substring) { codes.insert(String(code)) }
                }
            }
        }
        return codes
    }

    @Test func apiErrorCodesAreExactlyTheDocumentedEnum() throws {
        let documented = try Self.documented(Self.errorPath)
        #expect(Set(documented).count == documented.count, "duplicates in \(documented)")
        let server = try Self.httpLayerCodes()
        #expect(server.isSuperset(of: ["bad_request", "internal", "range_not_satisfiable", "too_many_connections", "forbidden"]))
        let answered = Set(APIError.Code.allCases.map(\.rawValue)).union(EngineError.Code.allCases.map(\.rawValue)).union(server)
        #expect(Set(documented).subtracting(answered).isEmpty, "documented but never answered")
        #expect(answered.subtracting(documented).isEmpty, "answered but not documented")
        let spec = try Self.specText()
        for code in answered {
            #expect(spec.contains("`\(code)`"), "no description names \(code)")
        }
    }

    static func sample(_ code: EngineError.Code) -> EngineError {
        switch code {
        case .invalidURL: .invalidURL("x")
        case .invalidChecksum: .invalidChecksum("x")
        case .conflict: .conflict("x")
        case .shuttingDown: .shuttingDown()
        case .tooManyCallers: .tooManyCallers("x")
        case .destinationForbidden: .destinationForbidden("x")
        case .urlCredentials: .urlCredentials("x")
        case .invalidHeaders: .invalidHeaders("x")
        case .heldElsewhere: .heldElsewhere(ownerURL: "http://replica-b:8080")
        case .databaseUnavailable: .databaseUnavailable()
        case .stateUnavailable: .stateUnavailable(StateStoreError(kind: .full, message: "disk full"), "the download is paused")
        case .busy: .busy("x")
        }
    }

    /// What each engine code answered while codes were strings: status and `Retry-After`.
    static let expected: [EngineError.Code: (status: Int, retryAfter: String?)] = [
        .invalidURL: (400, nil), .invalidChecksum: (400, nil), .urlCredentials: (400, nil), .invalidHeaders: (400, nil), .destinationForbidden: (403, nil),
        .conflict: (409, nil), .tooManyCallers: (429, "60"), .shuttingDown: (503, "5"), .heldElsewhere: (503, "1"),
        .databaseUnavailable: (503, "5"), .stateUnavailable: (503, "5"), .busy: (503, "1"),
    ]

    @Test(arguments: EngineError.Code.allCases)
    func engineErrorsKeepTheirStatus(_ code: EngineError.Code) throws {
        let expected = try #require(Self.expected[code], "no expected status for \(code.rawValue)")
        let error = APIError(engineError: Self.sample(code))
        #expect(error.code == code.rawValue && error.message == Self.sample(code).message)
        #expect(error.status == expected.status && error.headers["Retry-After"] == expected.retryAfter)
        #expect(error.headers.keys.allSatisfy { $0 == "Retry-After" })
    }

    /// Every status an engine error maps to is a documented answer of `POST /downloads`, and one with
    /// `Retry-After` is documented with that header.
    @Test(arguments: EngineError.Code.allCases)
    func engineErrorStatusesAreDocumentedForCreate(_ code: EngineError.Code) throws {
        let outline = try OpenAPIOutline.repositoryDocument()
        let error = APIError(engineError: Self.sample(code))
        let responses = try #require(outline.keys(at: ["paths", "/downloads", "post", "responses"]))
        #expect(responses.contains(String(error.status)), "POST /downloads does not document \(error.status) for \(code.rawValue)")
        if error.headers["Retry-After"] != nil {
            let ref = try #require(outline.value(at: ["paths", "/downloads", "post", "responses", String(error.status)]))
            let name = try #require(ref.firstMatch(of: try Regex(#"#/components/responses/([A-Za-z]+)"#))?.output[1].substring)
            let headers = outline.keys(at: ["components", "responses", String(name), "headers"]) ?? []
            #expect(headers.contains("Retry-After"), "\(name) does not document Retry-After")
        }
    }
}
