import Foundation

/// Polls `condition` every 50 ms for at most `seconds`; true once it holds (for effects that run on
/// another thread, such as a file deleted in the background).
func eventually(within seconds: Double, _ condition: () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return condition()
}

/// Asks `attempt` every 100 ms for at most `seconds`; its first non-nil answer (nil when none came).
func eventuallyValue<T>(within seconds: Double, _ attempt: () async throws -> T?) async throws -> T? {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if let value = try await attempt() { return value }
        try await Task.sleep(for: .milliseconds(100))
    }
    return try await attempt()
}
