/// A state store that also keeps named counters (the event feed reserves its ids in one, so that
/// they keep increasing across restarts).
protocol CounterStore: AnyObject {
    func counter(_ name: String) throws(StateStoreError) -> Int64?
    /// Stores `value` durably (returns once it is on stable storage).
    func setCounter(_ name: String, to value: Int64) throws(StateStoreError)
}

// The `counters` table (schema version 3). Used on the writer thread, like the rest of the store.
extension SQLiteStateStore: CounterStore {
    func counter(_ name: String) throws(StateStoreError) -> Int64? {
        let select = try db.prepare("SELECT value FROM counters WHERE name = ?1")
        select.bind(1, name)
        return try select.firstInt64()
    }

    func setCounter(_ name: String, to value: Int64) throws(StateStoreError) {
        let upsert = try db.prepare("INSERT INTO counters (name, value) VALUES (?1, ?2) ON CONFLICT (name) DO UPDATE SET value = excluded.value")
        upsert.bind(1, name)
        upsert.bind(2, value)
        try upsert.run()
    }
}
