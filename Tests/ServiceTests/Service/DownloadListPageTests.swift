@testable import DownloadService
@testable import DownloaderEngine
import Foundation
import MiniHTTPServer
import Testing

/// `GET /downloads` in pages: the query (table), the paging (pure), and the route in-process.
@Suite struct DownloadListPageTests {
    static func snapshot(_ id: String, at seconds: Double) -> DownloadSnapshot {
        let t = Date(timeIntervalSince1970: seconds)
        return DownloadSnapshot(id: id, url: "http://h/\(id)", state: .failed, storage: .cache, bytesWritten: 0,
                                createdAt: t, updatedAt: t)
    }

    static func items(_ query: String) -> [(name: String, value: String)] {
        Request(method: "GET", target: "/downloads?" + query).queryItems
    }

    @Test(arguments: [
        ("", nil, 1_000, nil),
        ("state=paused&limit=5", "paused", 5, nil),
        ("limit=1000&after=1700000000000000.ab12", nil, 1_000, "1700000000000000.ab12"),
        ("after=-5.x_y-Z&unknown=1", nil, 1_000, "-5.x_y-Z"),
    ] as [(String, String?, Int, String?)])
    func queriesThatParse(query: String, state: String?, limit: Int, after: String?) throws {
        let page = try DownloadListPage.parse(Self.items(query)).get()
        #expect(page.state?.rawValue == state && page.limit == limit && page.after?.text == after)
    }

    @Test(arguments: [
        ("state=sleeping", "invalid_state"), ("limit=0", "invalid_query"), ("limit=1001", "invalid_query"),
        ("limit=ten", "invalid_query"), ("limit=2&limit=3", "invalid_query"), ("state=paused&state=failed", "invalid_query"),
        ("after=abc", "invalid_query"), ("after=12.", "invalid_query"), ("after=x.ab", "invalid_query"),
        ("after=12.a%2Fb", "invalid_query"), ("after=99999999999999999999.a", "invalid_query"),
    ])
    func queriesThatAreRefused(query: String, code: String) {
        guard case .failure(let error) = DownloadListPage.parse(Self.items(query)) else {
            Issue.record("\(query) parsed")
            return
        }
        #expect(error.code == code && error.status == 400)
    }

    /// Pages follow one another newest first (equal times: greater id first), each download once,
    /// also when downloads are created and removed between pages.
    @Test func pagesCoverEveryDownloadOnceWhileTheListChanges() {
        var all = [Self.snapshot("a", at: 10), Self.snapshot("b", at: 30), Self.snapshot("c", at: 20),
                   Self.snapshot("d", at: 20), Self.snapshot("e", at: 5)]
        var query = DownloadListPage(limit: 2)
        let first = query.page(of: all)
        #expect(first.downloads.map(\.id) == ["b", "d"])
        #expect(first.next == DownloadListPage.Cursor(micros: 20_000_000, id: "d"))

        all.removeAll { $0.id == "d" }  // the cursor's own download goes
        all.append(Self.snapshot("f", at: 40))  // a newer one comes: it belongs before the cursor
        query.after = first.next
        let second = query.page(of: all)
        #expect(second.downloads.map(\.id) == ["c", "a"])
        #expect(second.next == DownloadListPage.Cursor(micros: 10_000_000, id: "a"))
        query.after = second.next
        let third = query.page(of: all)
        #expect(third.downloads.map(\.id) == ["e"] && third.next == nil)
        #expect(query.nextPath(DownloadListPage.Cursor(micros: 7, id: "e")) == "/downloads?limit=2&after=7.e")
        #expect(DownloadListPage(state: .paused).nextPath(.init(micros: 7, id: "e")) == "/downloads?state=paused&after=7.e")
    }

    /// The engine's page (`ListTop`): the first `limit` in list order whatever order they come in,
    /// ties of creation time ordered by id, the same as sorting everything and cutting.
    @Test(arguments: [0, 1, 3, 10, 64, 500])
    func theTopOfAListIsItsSortedPrefix(limit: Int) {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20 {
            let positions = (0..<Int.random(in: 0...300, using: &generator)).map { n in
                ListPosition(micros: Int64.random(in: 0...40, using: &generator), id: "d\(n)")  // many ties
            }
            var top = ListTop<String>(limit: limit)
            for position in positions.shuffled(using: &generator) { top.offer(position, position.id) }
            let expected = positions.sorted { $0.precedes($1) }.prefix(limit).map(\.id)
            #expect(top.items == Array(expected))
        }
    }

    @Test func aCreationTimeOutOfRangeNeverTraps() {
        #expect(DownloadListPage.Cursor.micros(Date(timeIntervalSince1970: 1e300)) == Int64.max)
        #expect(DownloadListPage.Cursor.micros(Date(timeIntervalSince1970: -1e300)) == Int64.min)
        #expect(DownloadListPage.Cursor.micros(Date(timeIntervalSince1970: .nan)) == 0)
        #expect(DownloadListPage.Cursor.micros(Date(timeIntervalSince1970: 1.5)) == 1_500_000)
    }

    /// Through the route: `next` and `Link` lead from page to page until every download was listed.
    @Test func theRouteAnswersPagesWithNextAndLink() async throws {
        let engine = try APILimitsTests.engine()
        let api = DownloadAPI(engine: engine, metrics: ServiceMetrics(), auth: nil)
        var created: [String] = []
        for n in 0..<5 {
            let response = await APILimitsTests.post(api, "http://localhost:9/page\(n)", from: "127.0.0.5:\(4000 + n)")
            created.append(try #require(APILimitsTests.json(response)["id"] as? String))
        }
        var listed: [String] = []
        var target = "/downloads?limit=2"
        for _ in 0..<5 {
            let response = await api.respond(to: Request(method: "GET", target: target, remoteAddress: "127.0.0.5:5000"))
            #expect(response.status == 200)
            let body = APILimitsTests.json(response)
            let ids = try #require(body["downloads"] as? [[String: Any]]).compactMap { $0["id"] as? String }
            #expect(ids.count <= 2)
            listed += ids
            guard let next = body["next"] as? String else {
                #expect(response.headers["Link"] == nil)
                break
            }
            #expect(response.headers["Link"] == "</downloads?limit=2&after=\(next)>; rel=\"next\"")
            target = "/downloads?limit=2&after=\(next)"
        }
        #expect(listed.count == 5 && Set(listed) == Set(created))
        let whole = await api.respond(to: Request(method: "GET", target: "/downloads", remoteAddress: "127.0.0.5:5000"))
        #expect((APILimitsTests.json(whole)["downloads"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == listed)
        #expect(APILimitsTests.json(whole)["next"] == nil)
        // A private download (caller headers) is listed for nobody without the admin token: no
        // page holds it and no `next` names it.
        var headers = HTTPHeaders()
        headers["Content-Type"] = "application/json"
        let made = await api.respond(to: Request(method: "POST", target: "/downloads", headers: headers,
                                                 body: Array(#"{"url":"http://localhost:9/private","headers":{"X-Api-Key":"k"}}"#.utf8),
                                                 remoteAddress: "127.0.0.5:6000"))
        let secret = try #require(APILimitsTests.json(made)["id"] as? String)
        target = "/downloads?limit=1"
        var seen: [String] = []
        for _ in 0..<10 {
            let response = await api.respond(to: Request(method: "GET", target: target, remoteAddress: "127.0.0.5:5000"))
            let body = APILimitsTests.json(response)
            seen += try #require(body["downloads"] as? [[String: Any]]).compactMap { $0["id"] as? String }
            #expect(!(response.headers["Link"] ?? "").contains(secret))
            guard let next = body["next"] as? String else { break }
            #expect(!next.contains(secret))
            target = "/downloads?limit=1&after=\(next)"
        }
        #expect(Set(seen) == Set(created) && seen.count == 5, "\(seen)")
        let refused = await api.respond(to: Request(method: "GET", target: "/downloads?limit=0", remoteAddress: "127.0.0.5:5000"))
        #expect(refused.status == 400 && APILimitsTests.errorCode(refused) == "invalid_query")
        await engine.shutdown()
    }
}
