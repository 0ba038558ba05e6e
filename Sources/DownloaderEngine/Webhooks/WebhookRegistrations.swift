/// The webhook registrations held in memory, by id, and indexed by download and by caller token:
/// a download's end or removal, and a caller's withdrawal, look at their own registrations only,
/// not at every one (a pass over 100 000 callers' registrations at every completion otherwise).
struct WebhookRegistrations {
    private var byID: [String: WebhookRegistration] = [:]
    private var byDownload: [String: Set<String>] = [:]
    private var byToken: [TokenHash: Set<String>] = [:]

    var count: Int { byID.count }
    var all: [WebhookRegistration] { Array(byID.values) }

    subscript(id: String) -> WebhookRegistration? { byID[id] }

    /// Adds `registration` (replacing one with its id).
    mutating func insert(_ registration: WebhookRegistration) {
        remove(registration.id)
        byID[registration.id] = registration
        byDownload[registration.downloadID, default: []].insert(registration.id)
        byToken[registration.tokenHash, default: []].insert(registration.id)
    }

    mutating func remove(_ id: String) {
        guard let registration = byID.removeValue(forKey: id) else { return }
        Self.take(id, from: &byDownload, at: registration.downloadID)
        Self.take(id, from: &byToken, at: registration.tokenHash)
    }

    /// The registrations on download `id`.
    func of(download id: String) -> [WebhookRegistration] {
        byDownload[id].map { $0.compactMap { byID[$0] } } ?? []
    }

    /// The ids of the registrations of the caller whose token hashes to `hash`.
    func ids(ofToken hash: TokenHash) -> [String] {
        byToken[hash].map(Array.init) ?? []
    }

    private static func take<Key: Hashable>(_ id: String, from index: inout [Key: Set<String>], at key: Key) {
        index[key]?.remove(id)
        if index[key]?.isEmpty == true { index[key] = nil }
    }
}
