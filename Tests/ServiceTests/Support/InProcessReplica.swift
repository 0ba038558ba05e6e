import DownloaderEngine
import Foundation
import MiniHTTPServer
import Synchronization
@testable import DownloadService

/// The service in this process (engine, API and server on 127.0.0.1 port 0, its own state
/// directory, single-process mode), with the API at hand, and a placement tests set (forwarding).
final class InProcessReplica: Sendable {
    let engine: DownloadEngine
    let api: DownloadAPI
    let server: HTTPServer
    let port: Int
    let root: URL
    /// Where this replica's API says every download lives (`.here` unless a test says otherwise).
    let placement = PlacementSetting()

    var url: String { "http://127.0.0.1:\(port)" }
    var client: HTTPTestClient { HTTPTestClient(port: port) }

    init(_ name: String, authToken: String? = nil, forwarder: PeerForwarder = PeerForwarder()) throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("ds-replica-\(name)-\(UUID().uuidString)")
        var configuration = EngineConfiguration(root: root)
        configuration.allowPrivateNetworks = true
        engine = try DownloadEngine(configuration: configuration)
        var api = DownloadAPI(engine: engine, metrics: ServiceMetrics(), auth: authToken.map(BearerAuth.init(token:)))
        api.forwarding.forwarder = forwarder
        let placement = self.placement
        api.forwarding.placement = { _ in placement.value.withLock { $0 } }
        self.api = api
        var serverConfiguration = ServerConfiguration()
        serverConfiguration.host = "127.0.0.1"
        serverConfiguration.port = 0
        serverConfiguration.shutdownGracePeriod = 2
        server = HTTPServer(configuration: serverConfiguration) { [api] request in await api.respond(to: request) }
        port = try server.start()
    }

    /// Every download this replica is asked about lives at `url`.
    func sendEverything(to url: String) {
        placement.value.withLock { $0 = .elsewhere(ownerURL: url) }
    }

    func stop() async {
        await server.shutdown()
        await engine.shutdown()
        try? FileManager.default.removeItem(at: root)
    }

    static func eventually(within seconds: Double, _ condition: () -> Bool) async -> Bool {
        await ServiceTests.eventually(within: seconds, condition)
    }
}

/// A placement a test sets and an API reads.
final class PlacementSetting: Sendable {
    let value = Mutex<Placement>(.here)
}
