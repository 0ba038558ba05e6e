import Foundation

/// Who this replica is in cluster mode: the owner id it writes into the leases it takes, the URL
/// other replicas reach it at (`--advertise-url`, what `Placement.elsewhere` names), and how long a
/// lease lasts without renewal (`--lease-ttl`, seconds, at least 1). Used only with
/// `EngineConfiguration.clusterDatabase`.
public struct ClusterReplica: Sendable, Equatable {
    public var owner: String
    public var advertiseURL: String
    public var leaseTTL: Double
    /// Seconds a completed download stays held after its completion or its last join (`LeaseLinger`;
    /// default 1).
    public var completedLinger: Double = 1

    /// `owner` defaults to a fresh random id (one per process: a restarted replica is a new owner).
    public init(owner: String = UUID().uuidString.lowercased(), advertiseURL: String = "", leaseTTL: Double = 10) {
        self.owner = owner
        self.advertiseURL = advertiseURL
        self.leaseTTL = max(1, leaseTTL)
    }
}

/// Cluster mode's counters for `/metrics`: leases held now, takeovers of lapsed leases, writes
/// refused because the lease that allowed them was lost (rows dropped or refused by the database,
/// file writes refused, refused or failed renewals, passed local deadlines), and whether this
/// replica is the janitor (holds the `janitor` lease within its local deadline).
public struct ClusterStatistics: Sendable, Equatable {
    public var leasesHeld = 0
    public var takeovers: Int64 = 0
    public var fencedWrites: Int64 = 0
    public var janitor = false

    public init() {}
}

extension CoalescingKey {
    /// The key of the download's lease row: the normalised URL (ignored query parameters left
    /// out), then, for a credentialed download, a space and the hex of its credential hash (a
    /// normalised URL holds no space).
    var leaseName: String {
        guard let credential else { return url }
        return url + " " + credential.map { String(format: "%02x", $0) }.joined()
    }
}
