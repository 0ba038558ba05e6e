/// What the holder of a download's lease tells the other replicas, at least once a second, about a
/// download it runs: what its snapshot shows beyond the stored row (bytes so far, callers with
/// readers, rate, connections). Written with the lease's key and epoch (`HeartbeatStore`): other
/// replicas count it only while that epoch's lease is active, so a released or taken-over download
/// is shown from its row alone.
struct Heartbeat: Sendable, Equatable {
    var id: String
    /// The lease (`leases.key`) the holder holds the download under, and its epoch.
    var leaseKey: String
    var epoch: Int64
    var bytesWritten: Int64
    var callers: Int
    var bytesPerSecond: Double
    var etaSeconds: Double?
    var connectionsGranted: Int
    var connectionsActive: Int
    /// Why the running download waits (`disk_full`), if it does.
    var reason: String?

    init(id: String, leaseKey: String, epoch: Int64, bytesWritten: Int64, callers: Int, bytesPerSecond: Double = 0,
         etaSeconds: Double? = nil, connectionsGranted: Int = 1, connectionsActive: Int = 0, reason: String? = nil) {
        self.id = id
        self.leaseKey = leaseKey
        self.epoch = epoch
        self.bytesWritten = bytesWritten
        self.callers = callers
        self.bytesPerSecond = bytesPerSecond
        self.etaSeconds = etaSeconds
        self.connectionsGranted = connectionsGranted
        self.connectionsActive = connectionsActive
        self.reason = reason
    }

    /// The heartbeat of the holder's own `snapshot` of the download.
    init(leaseKey: String, epoch: Int64, snapshot s: DownloadSnapshot) {
        self.init(id: s.id, leaseKey: leaseKey, epoch: epoch, bytesWritten: s.bytesWritten, callers: s.callers,
                  bytesPerSecond: s.bytesPerSecond, etaSeconds: s.etaSeconds,
                  connectionsGranted: s.connections?.granted ?? 1, connectionsActive: s.connections?.active ?? 0,
                  reason: s.state == .downloading ? s.reason : nil)
    }
}

extension EngineCore {
    /// The heartbeats of the downloads this replica holds (`held`: id → the lease key and epoch it
    /// holds the download under), from their current snapshots, under one lock; a download no
    /// longer in memory is left out. The holder writes them with `HeartbeatStore.write` at least
    /// once a second.
    func heartbeats(of held: [String: (leaseKey: String, epoch: Int64)]) -> [Heartbeat] {
        locked {
            held.compactMap { id, lease in
                byID[id].map { Heartbeat(leaseKey: lease.leaseKey, epoch: lease.epoch, snapshot: freshSnapshot($0)) }
            }
        }
    }
}
