import DownloaderEngine
import Foundation

/// The body of `POST /downloads`: `{"url", "storage"?, "sha256"?, "size"?, "headers"?, "connections"?}`, checked for shape and
/// types into a `DownloadRequest`, or an `APIError` that says exactly what is wrong. Pure. Whether
/// the URL is one the service fetches is the engine's call (`EngineError.invalidURL`).
enum CreateDownloadBody {
    static func parse(_ body: [UInt8]) -> Result<DownloadRequest, APIError> {
        parseWithObject(body).map(\.request)
    }

    /// `parse`, plus the body as `JSONSerialization` read it, for the members other parsers read
    /// (`CallbackBody`): the body is parsed once for all of them.
    static func parseWithObject(_ body: [UInt8]) -> Result<(request: DownloadRequest, object: Any), APIError> {
        let data = Data(body)
        guard let object = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) else {
            return .failure(.badRequest(.malformedJSON, "the body is not valid JSON"))
        }
        do {
            return .success((try JSONDecoder().decode(Fields.self, from: data).request, object))
        } catch let error as APIError {
            return .failure(error)
        } catch {
            return .failure(.badRequest(.invalidBody, "the body must be a JSON object with a \"url\""))
        }
    }

    /// The largest `size` accepted: JSON numbers are exact only up to 2^53-1 (openapi.yaml says so).
    static let maxSize: Int64 = 9_007_199_254_740_991

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// The members a body may have (`callback` is `CallbackBody`'s). Any other is refused: a
    /// misspelt `"sha265"` or `"header"` would otherwise be a download without the check or the
    /// credentials its caller meant.
    static let members = ["url", "storage", "sha256", "size", "headers", "connections", "callback"]

    private struct Fields: Decodable {
        var request: DownloadRequest

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: Key.self)
            if let unknown = c.allKeys.map(\.stringValue).filter({ !CreateDownloadBody.members.contains($0) }).sorted().first {
                let shown = unknown.count > 64 ? String(unknown.prefix(64)) + "…" : unknown
                throw APIError.badRequest(.invalidBody, "unknown member \"\(shown)\" (the members are "
                                          + CreateDownloadBody.members.joined(separator: ", ") + ")")
            }
            func field<T: Decodable>(_ name: String, _ type: T.Type, _ invalid: APIError) throws -> T? {
                let key = Key(stringValue: name)
                guard c.contains(key), try !c.decodeNil(forKey: key) else { return nil }
                do { return try c.decode(T.self, forKey: key) } catch { throw invalid }
            }
            let notString = APIError.badRequest(EngineError.Code.invalidURL, "\"url\" must be a string")
            guard let url = try field("url", String.self, notString) else {
                throw APIError.badRequest(.missingURL, "\"url\" is required")
            }
            request = DownloadRequest(url: url)
            let badStorage = APIError.badRequest(.invalidStorage, "\"storage\" must be \"cache\" or \"persistent\"")
            if let name = try field("storage", String.self, badStorage) {
                guard let storage = StorageClass(rawValue: name) else { throw badStorage }
                request.storage = storage
            }
            let badHash = APIError.badRequest(EngineError.Code.invalidChecksum, "\"sha256\" must be 64 hexadecimal digits")
            if let hex = try field("sha256", String.self, badHash) {
                guard hex.utf8.count == 64, hex.allSatisfy(\.isHexDigit) else { throw badHash }
                request.sha256 = hex.lowercased()
            }
            let badSize = APIError.badRequest(.invalidSize, "\"size\" must be an integer from 0 to 2^53-1")
            if let size = try field("size", Int64.self, badSize) {
                guard (0...CreateDownloadBody.maxSize).contains(size) else { throw badSize }
                request.size = size
            }
            // Which names and values are accepted is the engine's rule (`CallerHeaders`); here only the shape.
            let badHeaders = APIError.badRequest(EngineError.Code.invalidHeaders,
                                                 "\"headers\" must be an object of header names to string values")
            if let headers = try field("headers", [String: String].self, badHeaders) {
                request.headers = headers
            }
            let ceiling = CommandLineOptions.connectionsCeiling
            let badConnections = APIError.badRequest(.invalidConnections, "\"connections\" must be an integer from 1 to \(ceiling)")
            if let connections = try field("connections", Int.self, badConnections) {
                guard (1...ceiling).contains(connections) else { throw badConnections }
                request.connections = connections
            }
        }
    }
}
