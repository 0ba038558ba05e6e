@testable import DownloadService
@testable import DownloaderEngine
import Foundation
import MiniHTTPServer
import Testing

/// While the state database cannot commit (a full or failing disk), the service says so: `/readyz`
/// is `503 state_unavailable`, `/metrics` shows `state_commit_failing 1`, and an operator's pause
/// is answered `503 state_unavailable` (it took effect; asking again once commits work gets `200`).
/// In-process (`DownloadAPI`, no socket) with a fake transfer.
@Suite(.timeLimit(.minutes(1)))
struct StateFailureAPITests {
    static func ask(_ api: DownloadAPI, _ method: String, _ target: String) async -> (Response, [String: Any]) {
        let response = await api.respond(to: Request(method: method, target: target))
        guard case .bytes(let bytes) = response.body else { return (response, [:]) }
        return (response, (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] ?? [:])
    }

    static func metricsText(_ api: DownloadAPI) async -> String {
        let response = await api.respond(to: Request(method: "GET", target: "/metrics"))
        guard case .bytes(let bytes) = response.body else { return "" }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func code(_ json: [String: Any]) -> String? { (json["error"] as? [String: Any])?["code"] as? String }

    @Test func readinessMetricsAndTheOperatorSayThatChangesCannotBeRecorded() async throws {
        let driver = FakeTransferDriver()
        let (engine, gate) = try EngineStateFailureTests.engine(EngineFixture.root(), driver: driver)
        let api = DownloadAPI(engine: engine, metrics: ServiceMetrics(), auth: nil)
        let id = try await EngineOperatorTests.transferring(engine, driver).snapshot.id
        #expect(await Self.ask(api, "GET", "/readyz").0.status == 200)
        #expect(await Self.metricsText(api).contains("download_service_state_commit_failing 0\n"))

        gate.fail(true)
        let (paused, pausedBody) = await Self.ask(api, "POST", "/admin/downloads/\(id)/pause")
        #expect(paused.status == 503 && Self.code(pausedBody) == "state_unavailable" && paused.headers["Retry-After"] == "5")
        let (ready, readyBody) = await Self.ask(api, "GET", "/readyz")
        #expect(ready.status == 503 && Self.code(readyBody) == "state_unavailable")
        #expect(await Self.metricsText(api).contains("download_service_state_commit_failing 1\n"))

        gate.fail(false)
        #expect(engine.core.stateWriter.flush())
        #expect(await Self.ask(api, "GET", "/readyz").0.status == 200)
        let (again, body) = await Self.ask(api, "POST", "/admin/downloads/\(id)/pause")
        #expect(again.status == 200 && body["pausedBy"] as? String == "operator")
        await engine.shutdown()
    }
}
