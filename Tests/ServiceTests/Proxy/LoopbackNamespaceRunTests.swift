import Testing

/// Runs the suites that fetch through a real proxy, or change the network's settings, in a
/// loopback-only network namespace (see `LoopbackNamespace`): they are skipped anywhere else.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct LoopbackNamespaceRunTests {
    @Test func fetchingThroughSquid() async throws {
        try await LoopbackNamespace.run(suite: "ProxiedFetchTests/")
    }

    @Test func theSSRFGuardsTestsThroughSquid() async throws {
        try await LoopbackNamespace.run(suite: "ProxiedGuardTests/")
    }

    @Test func aNameserverThatNeverAnswers() async throws {
        try await LoopbackNamespace.run(suite: "SlowResolverTests/", resolver: SlowResolverTests.resolvConf)
    }

    @Test func aDualStackListenerWithBindV6OnlySet() async throws {
        try await LoopbackNamespace.run(suite: "DualStackListenerTests/")
    }
}
