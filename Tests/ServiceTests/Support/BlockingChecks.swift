import Testing

/// Checks made by blocking work that runs on a thread of its own (`onThread`: database round trips,
/// process waits), kept and recorded as expectations by the test once the work is done. A blocking
/// test body would tie up the small cooperative pool that in-process servers of other tests need.
final class BlockingChecks: @unchecked Sendable {
    struct Failure: Error, CustomStringConvertible { var description: String }

    private var outcomes: [(passed: Bool, comment: String, location: SourceLocation)] = []

    func expect(_ condition: @autoclosure () throws -> Bool, _ comment: String = "",
                sourceLocation: SourceLocation = #_sourceLocation) rethrows {
        outcomes.append((try condition(), comment, sourceLocation))
    }

    /// The value, or a recorded failure and a thrown error when it is nil.
    func require<T>(_ value: @autoclosure () throws -> T?, _ comment: String = "",
                    sourceLocation: SourceLocation = #_sourceLocation) throws -> T {
        guard let found = try value() else {
            outcomes.append((false, "required value is nil " + comment, sourceLocation))
            throw Failure(description: "required value is nil " + comment)
        }
        return found
    }

    fileprivate func record() {
        for outcome in outcomes {
            #expect(outcome.passed, Comment(rawValue: outcome.comment), sourceLocation: outcome.location)
        }
    }
}

/// Runs `body` on a thread of its own, then records its checks.
func blocking(_ body: @escaping @Sendable (BlockingChecks) throws -> Void) async throws {
    let checks = BlockingChecks()
    defer { checks.record() }
    try await onThread { try body(checks) }
}
