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
