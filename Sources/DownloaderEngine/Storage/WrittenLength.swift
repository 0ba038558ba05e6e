import Synchronization

/// How many bytes of a partial file are in the file (from its start): advanced by the thread that
/// writes it, read from any thread (e.g. by a reader of the file while it is being fetched).
final class WrittenLength: Sendable {
    private let bytes: Atomic<Int64>

    init(_ bytes: Int64) { self.bytes = Atomic(bytes) }

    var value: Int64 { bytes.load(ordering: .acquiring) }

    func set(_ value: Int64) { bytes.store(value, ordering: .releasing) }

    func add(_ count: Int64) { bytes.add(count, ordering: .releasing) }
}
