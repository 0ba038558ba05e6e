import Testing

/// Waiting on a download's progress stream through the real service.
extension ServiceProcess {
    /// Waits on the progress stream of `id` until an event satisfies `matches` (every read bounded
    /// by the client's socket timeout); returns its data. `what` names the awaited event should the
    /// stream end first. `token`: a caller token of a private download.
    func waitForEvent(id: String, token: String? = nil, _ what: String,
                      where matches: @escaping @Sendable (EventStream.Event) -> Bool) async throws -> [String: Any] {
        let (head, stream) = try await client.openStream("/downloads/\(id)/progress" + (token.map { "?token=\($0)" } ?? ""))
        defer { stream.close() }
        #expect(head.status == 200)
        let event = try await stream.next(where: matches)
        return try #require(event, "the progress stream of \(id) ended before \(what)").json
    }

    /// Waits on the progress stream of `id` for `completed` or `failed`; returns its data.
    func waitForEnd(id: String, token: String? = nil) async throws -> [String: Any] {
        try await waitForEvent(id: id, token: token, "completed/failed") { $0.event == "completed" || $0.event == "failed" }
    }
}
