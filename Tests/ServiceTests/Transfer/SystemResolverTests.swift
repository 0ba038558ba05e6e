@testable import DownloaderEngine
import Dispatch
import Synchronization
import Testing

/// The proxy path's resolver: a name that hangs holds one thread, never the others' lookups.
@Suite struct SystemResolverTests {
    /// A lookup that blocks for the names in `hanging` until `release`, and counts its calls.
    final class GatedLookup: Sendable {
        let calls = Mutex<[String]>([])
        let gate = DispatchSemaphore(value: 0)
        let hanging: Set<String>

        init(hanging: Set<String>) { self.hanging = hanging }

        func callAsFunction(_ host: String, _ port: Int) -> [IPAddress] {
            calls.withLock { $0.append(host) }
            if hanging.contains(host) { gate.wait(); gate.signal() }
            return [IPAddress("127.0.0.\(host.utf8.count)")!]
        }
    }

    final class Answers: Sendable {
        let got = Mutex<[String: [IPAddress]]>([:])
        func callback(_ tag: String) -> @Sendable ([IPAddress]) -> Void { { addresses in self.got.withLock { $0[tag] = addresses } } }
        var count: Int { got.withLock { $0.count } }
    }

    @Test func concurrentLookupsOfOneHostShareOneCallAndOthersGoOnBesideIt() async throws {
        let lookup = GatedLookup(hanging: ["slow.example"])
        let resolver = SystemResolver(width: 2) { lookup($0, $1) }
        let answers = Answers()
        for index in 0..<5 { resolver.resolve("slow.example", port: 443, done: answers.callback("slow\(index)")) }
        // Five attempts on the hanging name took one thread: another name still resolves at once.
        resolver.resolve("ok.example", port: 443, done: answers.callback("ok"))
        #expect(await eventually(within: 10) { answers.count == 1 })
        #expect(answers.got.withLock { $0["ok"] } == [IPAddress("127.0.0.10")!])
        #expect(lookup.calls.withLock { $0.filter { $0 == "slow.example" }.count } == 1)

        lookup.gate.signal()
        #expect(await eventually(within: 10) { answers.count == 6 })
        #expect(answers.got.withLock { $0["slow4"] } == [IPAddress("127.0.0.12")!])
        // Once answered, the next lookup of that name asks again (nothing is cached).
        resolver.resolve("slow.example", port: 443, done: answers.callback("again"))
        #expect(await eventually(within: 10) { answers.count == 7 })
        #expect(lookup.calls.withLock { $0.filter { $0 == "slow.example" }.count } == 2)
    }

    @Test func theSystemLookupFindsLoopback() {
        #expect(SystemResolver.addresses(of: "127.0.0.1", port: 80) == [IPAddress("127.0.0.1")!])
    }
}
