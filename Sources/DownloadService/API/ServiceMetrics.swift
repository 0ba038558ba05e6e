import DownloaderEngine
import Foundation
import Synchronization

/// HTTP-side counters fed by the server's access log; engine counters come from the engine.
final class ServiceMetrics: Sendable {
    struct HTTPCounts: Sendable, Equatable {
        var requestsByStatus: [Int: Int64] = [:]
        /// Body bytes of `/downloads/{id}/file` answers.
        var fileBytesServed: Int64 = 0
    }

    private let counts = Mutex(HTTPCounts())

    func record(status: Int, bytes: Int64, isFile: Bool) {
        counts.withLock {
            $0.requestsByStatus[status, default: 0] += 1
            if isFile { $0.fileBytesServed += bytes }
        }
    }

    var http: HTTPCounts { counts.withLock { $0 } }

    /// Whether a response's body is file bytes (`bytes_served_total`): a download's file, or what
    /// `/fetch` streams or serves, when the status is 2xx.
    static func servesFile(path: String, status: Int) -> Bool {
        (200..<300).contains(status) && (path.hasSuffix("/file") || Endpoint(path: path) == .fetch)
    }

    /// Prometheus text exposition format (version 0.0.4). `eventWatchers`: `GET /events` streams open. Pure.
    static func render(states: [DownloadState: Int], engine: EngineStatistics, eventWatchers: Int, http: HTTPCounts) -> String {
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ samples: [(labels: String, value: String)]) {
            out += "# HELP download_service_\(name) \(help)\n# TYPE download_service_\(name) \(type)\n"
            for s in samples { out += "download_service_\(name)\(s.labels) \(s.value)\n" }
        }
        metric("downloads", "gauge", "Downloads by state.",
               DownloadState.allCases.map { (#"{state=""# + $0.rawValue + #""}"#, String(states[$0] ?? 0)) })
        metric("bytes_fetched_total", "counter", "Body bytes received from origins.", [("", String(engine.bytesFetched))])
        metric("bytes_served_total", "counter", "File bytes sent to callers.", [("", String(http.fileBytesServed))])
        metric("coalesced_joins_total", "counter", "Requests that joined an existing download.", [("", String(engine.coalescedJoins))])
        metric("resumes_total", "counter", "Transfers resumed from kept bytes.", [("", String(engine.resumes))])
        metric("restarts_total", "counter", "Transfers that discarded kept bytes and restarted from 0.", [("", String(engine.restarts))])
        metric("retries_total", "counter", "Automatic retries after faults.", [("", String(engine.retries))])
        metric("downloads_completed_total", "counter", "Downloads that completed (every byte verified, the file durable).",
               [("", String(engine.completions))])
        metric("downloads_failed_total", "counter", "Downloads that failed, by code (the API's error.code).",
               DownloadFailure.Code.allCases.map { (#"{code=""# + $0.rawValue + #""}"#, String(engine.failures[$0] ?? 0)) })
        metric("active_transfers", "gauge", "Transfers running now.", [("", String(engine.activeTransfers))])
        metric("downloads_waiting_for_space", "gauge", "Downloads that ran out of disk space and wait for it (reason disk_full).",
               [("", String(engine.waitingForSpace))])
        metric("sse_subscribers", "gauge", "Open progress streams.", [("", String(engine.subscribers))])
        metric("event_watchers", "gauge", "Open GET /events streams.", [("", String(eventWatchers))])
        metric("state_commit_failing", "gauge", "1 while the state store's last commit failed (retried every second), else 0.",
               [("", engine.stateFailure == nil ? "0" : "1")])
        metric("purged_total", "counter", "Files purged, by kind (paused_partial, cache_file) and reason (memory, disk, ttl, cache_limit, client_limit).",
               PurgeKind.allCases.flatMap { kind in
                   PurgeReason.allCases.map { reason in
                       (#"{kind=""# + kind.rawValue + #"",reason=""# + reason.rawValue + #""}"#,
                        String(engine.purges[PurgeCounterKey(kind: kind, reason: reason)] ?? 0))
                   }
               })
        metric("http_requests_total", "counter", "HTTP requests answered, by status.",
               http.requestsByStatus.sorted { $0.key < $1.key }.map { (#"{status=""# + String($0.key) + #""}"#, String($0.value)) })
        if let cluster = engine.cluster {
            metric("cluster_leases_held", "gauge", "Download leases this replica holds.", [("", String(cluster.leasesHeld))])
            metric("cluster_takeovers_total", "counter", "Lapsed leases this replica took over.", [("", String(cluster.takeovers))])
            metric("cluster_fenced_writes_total", "counter",
                   "Writes refused because the lease that allowed them was lost (refused renewals included).",
                   [("", String(cluster.fencedWrites))])
            metric("cluster_janitor", "gauge", "1 on the replica holding the janitor lease (it runs the purges), else 0.",
                   [("", cluster.janitor ? "1" : "0")])
        }
        return out
    }
}
