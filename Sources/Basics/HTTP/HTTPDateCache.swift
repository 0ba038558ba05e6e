/// The `Date` header's bytes for one wall-clock second: `HTTPDate.format` runs again only when the
/// second changes. Why: every response carries a `Date`; this way a response costs a comparison
/// instead of a `gmtime_r` and a `String` built for each one (nginx caches its time the same way).
/// Not thread-safe: one per thread (the server keeps one per event loop).
public struct HTTPDateCache: ~Copyable {
    @usableFromInline let storage: UnsafeMutableBufferPointer<UInt8> = .allocate(capacity: 32)
    @usableFromInline var count = 0
    @usableFromInline var second = -1

    public init() {}

    deinit { storage.deallocate() }

    /// The IMF-fixdate of `wallSecond` (seconds since the epoch; 29 ASCII bytes), formatted only if
    /// the last call was for another second. The bytes stay valid until a call for another second.
    @inlinable
    public mutating func bytes(forSecond wallSecond: Int) -> UnsafeBufferPointer<UInt8> {
        if wallSecond != second { refresh(wallSecond) }
        return UnsafeBufferPointer(start: storage.baseAddress, count: count)
    }

    @usableFromInline
    mutating func refresh(_ wallSecond: Int) {
        second = wallSecond
        var text = HTTPDate.format(wallSecond)
        text.withUTF8 { utf8 in
            count = min(utf8.count, storage.count)
            storage.baseAddress!.update(from: utf8.baseAddress!, count: count)
        }
    }
}
