import Foundation
import Testing
@testable import DownloadService
@testable import DownloaderEngine

/// `connections` on the API and `--max-connections-per-download`; the segments' stored form.
@Suite struct SegmentOptionsTests {
    @Test func maxConnectionsPerDownloadDefaultsToOneAndReachesTheEngine() {
        guard case .run(let defaults) = CommandLineOptions.parse(arguments: [], environment: ["HOME": "/h"]) else {
            Issue.record("expected run")
            return
        }
        #expect(defaults.maxConnectionsPerDownload == 1 && defaults.engineConfiguration.maxConnectionsPerDownload == 1)
        guard case .run(let c) = CommandLineOptions.parse(arguments: ["--max-connections-per-download", "4"],
                                                          environment: ["HOME": "/h"]) else {
            Issue.record("expected run")
            return
        }
        #expect(c.engineConfiguration.maxConnectionsPerDownload == 4)
        guard case .run(let e) = CommandLineOptions.parse(arguments: [],
                                                          environment: ["HOME": "/h", "DOWNLOAD_SERVICE_MAX_CONNECTIONS_PER_DOWNLOAD": "8"]) else {
            Issue.record("expected run")
            return
        }
        #expect(e.maxConnectionsPerDownload == 8)
        for bad in ["0", "17", "-1", "x", ""] {
            guard case .invalid = CommandLineOptions.parse(arguments: ["--max-connections-per-download", bad], environment: ["HOME": "/h"]) else {
                Issue.record("accepted \(bad)")
                continue
            }
        }
    }

    @Test func helpNamesTheOption() {
        #expect(CommandLineOptions.usage.contains("--max-connections-per-download N"))
        #expect(CommandLineOptions.usage.contains("DOWNLOAD_SERVICE_MAX_CONNECTIONS_PER_DOWNLOAD"))
    }

    @Test(arguments: [
        (#"{"url":"http://h/x","connections":4}"#, 4), (#"{"url":"http://h/x","connections":1}"#, 1),
        (#"{"url":"http://h/x","connections":16}"#, 16), (#"{"url":"http://h/x","connections":null}"#, nil),
        (#"{"url":"http://h/x"}"#, nil),
    ] as [(String, Int?)])
    func bodyConnections(_ row: (String, Int?)) throws {
        #expect(try CreateDownloadBody.parse(Array(row.0.utf8)).get().connections == row.1)
    }

    @Test(arguments: ["0", "17", "-2", "2.5", "\"4\"", "true"])
    func badBodyConnectionsAreRefused(_ value: String) {
        guard case .failure(let error) = CreateDownloadBody.parse(Array(#"{"url":"http://h/x","connections":\#(value)}"#.utf8)) else {
            Issue.record("accepted \(value)")
            return
        }
        #expect(error.code == "invalid_connections")
        #expect(error.status == 400)
    }

    @Test func fetchQueryConnections() throws {
        #expect(try FetchQuery.parse("url=http%3A%2F%2Fo.test%2Ff&connections=4").get().request.connections == 4)
        #expect(try FetchQuery.parse("url=http%3A%2F%2Fo.test%2Ff").get().request.connections == nil)
        for bad in ["0", "17", "x", ""] {
            guard case .failure(let error) = FetchQuery.parse("url=http%3A%2F%2Fo.test%2Ff&connections=\(bad)") else {
                Issue.record("accepted \(bad)")
                continue
            }
            #expect(error.code == "invalid_connections")
        }
    }

    @Test func snapshotJSONShowsConnectionsOnlyWhenAsked() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        var snapshot = DownloadSnapshot(id: "a", url: "http://h/x", state: .downloading, storage: .cache, createdAt: now, updatedAt: now)
        #expect(SnapshotJSON.object(snapshot)["connections"] == nil)
        snapshot.connections = ConnectionCounts(requested: 8, granted: 4, active: 3)
        let connections = SnapshotJSON.object(snapshot)["connections"]
        #expect(connections == .object({
            var o = JSONObject()
            o.append("active", .int(3))
            o.append("granted", .int(4))
            o.append("requested", .int(8))
            return o
        }()))
    }

    @Test(arguments: [
        ("0-10-10;10-20-15", [Segment(start: 0, end: 10, next: 10), Segment(start: 10, end: 20, next: 15)]),
        ("0-10-3;10-20-10;20-25-25", [Segment(start: 0, end: 10, next: 3), Segment(start: 10, end: 20, next: 10),
                                      Segment(start: 20, end: 25, next: 25)]),
        ("0-10-10", nil),  // one segment is no segmented download
        ("0-10-11;10-20-10", nil), ("0-10-10;11-20-11", nil), ("0-10-5;10-20-9", nil), ("", nil), ("a-b-c;1-2-3", nil),
        ("0-10-10;10-20", nil), ("-1-10-0;10-20-10", nil),
    ] as [(String, [Segment]?)])
    func segmentJournal(_ row: (String, [Segment]?)) {
        #expect(SegmentJournal.segments(row.0) == row.1)
        if let segments = row.1 { #expect(SegmentJournal.text(segments) == row.0) }
    }
}
