import Foundation
import Testing
@testable import DownloaderEngine

/// `GET /fetch` through the real executable against the in-process `TestOrigin` on loopback.
@Suite(.timeLimit(.minutes(3)))
struct FetchLiveTests {
    static let loopback = ["--allow-private-networks"]

    static func path(_ url: String) -> String {
        "/fetch?url=" + (url.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? url)
    }

    /// Sends `GET /fetch` for `url` on a fresh connection (the caller reads the answer).
    static func open(_ service: ServiceProcess, _ url: String, headers: [String: String] = [:]) async throws -> RawHTTPClient {
        let client = try await RawHTTPClient.connect(port: service.port)
        var text = "GET \(path(url)) HTTP/1.1\r\nHost: t\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        try await client.send(text + "\r\n")
        return client
    }

    static func fetch(_ service: ServiceProcess, _ url: String, headers: [String: String] = [:]) async throws -> RawHTTPResponse {
        let client = try await open(service, url, headers: headers)
        defer { client.close() }
        return try await client.readResponse()
    }

    /// The download of `url` (the only one the service has), once its bytes reach `bytes`.
    static func waitForBytes(_ service: ServiceProcess, id: String, atLeast bytes: Int) async throws {
        _ = try await service.waitForEvent(id: id, "\(bytes) bytes") { ($0.json["bytesWritten"] as? Int ?? 0) >= bytes }
    }

    @Test func concurrentReadersShareOneTransferAndGetIdenticalBodies() async throws {
        let origin = try TestOrigin(bodySize: 3 << 20)
        defer { origin.stop() }
        origin.update { $0.bytesPerSecond = 6 << 20 }
        let service = try await ServiceProcess.start(arguments: Self.loopback)
        let responses = try await withThrowingTaskGroup(of: RawHTTPResponse.self) { group in
            for _ in 0..<5 { group.addTask { try await Self.fetch(service, origin.url) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let expected = origin.expectedBody()
        for response in responses {
            #expect(response.status == 200)
            #expect(response.body == expected)
            #expect(response.header("Content-Length") == "\(3 << 20)")
            #expect(response.header("ETag") == origin.etag())
            #expect(response.header("Link")?.hasSuffix("/progress>; rel=\"progress\"") == true)
        }
        #expect(Set(responses.compactMap { $0.header("X-Download-Id") }).count == 1)
        #expect(origin.getCount() == 1, "one upstream transfer for five readers")
        // The completed download is stored, listed and servable like any other.
        let id = try #require(responses.first?.header("X-Download-Id"))
        let file = try await service.client.request("GET", "/downloads/\(id)/file")
        #expect(file.status == 200 && file.body == expected)
        // `/fetch/<name>` is the same endpoint (the name for tools that take it from the path: pip, curl -O).
        let named = try await service.client.request("GET", Self.path(origin.url).replacingOccurrences(of: "/fetch?", with: "/fetch/pkg-1.0-py3-none-any.whl?"))
        #expect(named.status == 200 && named.body == expected && named.header("X-Download-Id") == id)
        // Its file route takes the origin's ETag of that version in If-Range, If-None-Match and If-Match.
        let originETag = try #require(origin.etag())
        let ranged = try await service.client.request("GET", "/downloads/\(id)/file",
                                                      headers: ["Range": "bytes=0-9", "If-Range": originETag])
        #expect(ranged.status == 206 && ranged.body == Array(expected[0...9]))
        // The answer names the tag the client holds (BuildKit's ADD and caches refuse a 304 naming
        // another): the one its condition named.
        #expect(ranged.header("ETag") == originETag)
        for method in ["GET", "HEAD"] {
            let same = try await service.client.request(method, Self.path(origin.url), headers: ["If-None-Match": originETag])
            #expect(same.status == 304 && same.header("ETag") == originETag, "\(method) /fetch: \(same.status) \(same.header("ETag") ?? "-")")
        }
        let unconditional = try await service.client.request("GET", "/downloads/\(id)/file")
        #expect(unconditional.header("ETag")?.count == 66, "otherwise its SHA-256")
        #expect(try await service.client.request("GET", "/downloads/\(id)/file", headers: ["If-None-Match": originETag]).status == 304)
        #expect(try await service.client.request("HEAD", "/downloads/\(id)/file", headers: ["If-Match": originETag]).status == 200)
        #expect(try await service.client.request("HEAD", "/downloads/\(id)/file", headers: ["If-Match": "\"other\""]).status == 412)
        // And /fetch now serves the stored file, honouring an If-Range with the origin's ETag.
        let stored = try await Self.fetch(service, origin.url, headers: ["Range": "bytes=10-19", "If-Range": origin.etag() ?? ""])
        #expect(stored.status == 206 && stored.body == Array(expected[10...19]))
    }

    /// An origin whose validator is its Last-Modified (no ETag): once stored, an If-Range with that
    /// date is honoured, on /fetch and on the file route.
    @Test func afterCompletionAnIfRangeWithTheOriginsDateIsHonoured() async throws {
        let origin = try TestOrigin(bodySize: 100_000)
        defer { origin.stop() }
        origin.update { $0.validators = .lastModifiedOnly }
        let service = try await ServiceProcess.start(arguments: Self.loopback)
        let first = try await Self.fetch(service, origin.url)
        let id = try #require(first.header("X-Download-Id"))
        let date = try #require(origin.lastModified())
        let expected = origin.expectedBody()
        let fetched = try await Self.fetch(service, origin.url, headers: ["Range": "bytes=10-19", "If-Range": date])
        #expect(fetched.status == 206 && fetched.body == Array(expected[10...19]))
        let file = try await service.client.request("GET", "/downloads/\(id)/file", headers: ["Range": "bytes=10-19", "If-Range": date])
        #expect(file.status == 206 && file.body == Array(expected[10...19]))
        let other = try await service.client.request("GET", "/downloads/\(id)/file",
                                                     headers: ["Range": "bytes=10-19", "If-Range": "Thu, 01 Jan 2004 00:00:00 GMT"])
        #expect(other.status == 200 && other.body == expected)
    }

    @Test func aReaderJoiningHalfWayGetsTheWholeBody() async throws {
        let origin = try ServiceLiveTests.originStallingAtOneMiB(bodySize: 2 << 20, seconds: 30)
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: Self.loopback)
        let first = try await Self.open(service, origin.url)
        defer { first.close() }
        let head = try await first.readResponseHead()
        let id = try #require(head.header("X-Download-Id"))
        try await ServiceLiveTests.waitForTheStall(service, id: id)
        let second = try await Self.open(service, origin.url)
        defer { second.close() }
        origin.update { $0.stallBound = 0 }  // the origin drops the stalled transfer: the engine resumes
        let late = try await second.readResponse()
        #expect(late.status == 200 && late.body == origin.expectedBody())
        #expect(origin.getCount() == 2, "the first GET, then one resume")
        #expect(origin.requests().last?.header("Range") == "bytes=\(1 << 20)-")
    }

    @Test func rangesInsideAndBeyondTheBytesOnDisk() async throws {
        let origin = try ServiceLiveTests.originStallingAtOneMiB(bodySize: 3 << 20, seconds: 30)
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: Self.loopback)
        let holder = try await Self.open(service, origin.url)
        defer { holder.close() }
        let id = try #require(try await holder.readResponseHead().header("X-Download-Id"))
        try await ServiceLiveTests.waitForTheStall(service, id: id)
        let expected = origin.expectedBody()
        let inside = try await Self.fetch(service, origin.url, headers: ["Range": "bytes=100-199", "If-Range": origin.etag() ?? ""])
        #expect(inside.status == 206)
        #expect(inside.header("Content-Range") == "bytes 100-199/\(3 << 20)")
        #expect(inside.body == Array(expected[100...199]))
        // HEAD weighs the same headers as GET; If-None-Match of the version landing is a 304.
        let head = try await service.client.request("HEAD", Self.path(origin.url),
                                                    headers: ["Range": "bytes=100-199", "If-Range": origin.etag() ?? ""])
        #expect(head.status == 206 && head.header("Content-Length") == "100" && head.body.isEmpty)
        #expect(head.header("Content-Range") == "bytes 100-199/\(3 << 20)")
        #expect(head.header("Content-Disposition") == inside.header("Content-Disposition") && inside.header("Content-Disposition") != nil)
        for method in ["GET", "HEAD"] {
            let fresh = try await service.client.request(method, Self.path(origin.url), headers: ["If-None-Match": origin.etag() ?? ""])
            #expect(fresh.status == 304 && fresh.header("ETag") == origin.etag() && fresh.body.isEmpty, "\(method)")
            #expect(fresh.header("X-Download-Id") == id, "\(method)")
        }
        let beyond = try await Self.open(service, origin.url, headers: ["Range": "bytes=\(2 << 20)-\((2 << 20) + 99)"])
        defer { beyond.close() }
        let beyondHead = try await beyond.readResponseHead()
        #expect(beyondHead.status == 206, "the head goes out at once; the bytes follow when they land")
        origin.update { $0.stallBound = 0 }
        let unsatisfiable = try await Self.fetch(service, origin.url, headers: ["Range": "bytes=\(3 << 20)-"])
        #expect(unsatisfiable.status == 416)
        #expect(unsatisfiable.header("Content-Range") == "bytes */\(3 << 20)")
        #expect(unsatisfiable.header("ETag") == origin.etag() && unsatisfiable.header("X-Download-Id") == id)
        // Expectations that contradict the download: 409, naming it.
        let conflict = try await service.client.request("GET", Self.path(origin.url) + "&size=5")
        #expect(conflict.status == 409 && (conflict.json["error"] as? [String: Any])?["code"] as? String == "conflict")
        #expect(conflict.header("X-Download-Id") == id && conflict.header("Link") != nil)
        let rest = try await beyond.readExactBody(count: 100)
        #expect(rest == Array(expected[(2 << 20)...((2 << 20) + 99)]))
    }

    @Test func readersKeepStreamingAcrossACutOrigin() async throws {
        let origin = try TestOrigin(bodySize: 3 << 20)
        defer { origin.stop() }
        origin.inject(.cut(afterBodyBytes: 1 << 20))
        let service = try await ServiceProcess.start(arguments: Self.loopback)
        async let a = Self.fetch(service, origin.url)
        async let b = Self.fetch(service, origin.url)
        let (ra, rb) = try await (a, b)
        #expect(ra.body == origin.expectedBody() && rb.body == origin.expectedBody())
        #expect(origin.getCount() == 2)
        #expect(origin.requests().last?.header("If-Range") == origin.etag())
    }

    @Test func aFileChangingMidStreamAbortsReadersAndNeverSplices() async throws {
        let origin = try TestOrigin(bodySize: 3 << 20)
        defer { origin.stop() }
        let old = origin.expectedBody()
        let oldETag = origin.etag()
        origin.inject(.changeVersion(afterBodyBytes: 1 << 20))
        let service = try await ServiceProcess.start(arguments: Self.loopback)
        let reader = try await Self.open(service, origin.url)
        defer { reader.close() }
        let head = try await reader.readResponseHead()
        #expect(head.header("ETag") == oldETag)
        let received = try await reader.readToEnd()
        #expect(received.count < 3 << 20, "cut short of Content-Length: \(received.count)")
        #expect(received == Array(old.prefix(received.count)), "only bytes of the version its head named")
        // A bare Range on the changed file is refused; the whole new version is served.
        let bare = try await Self.fetch(service, origin.url, headers: ["Range": "bytes=\(received.count)-"])
        #expect(bare.status == 409)
        #expect((bare.json["error"] as? [String: Any])?["code"] as? String == "changed")
        #expect(bare.header("X-Download-Id") == head.header("X-Download-Id"))
        #expect(bare.header("ETag") != oldETag && bare.header("ETag") != nil, "names the current version, for an If-Range")
        let fresh = try await Self.fetch(service, origin.url)
        #expect(fresh.status == 200 && fresh.body == origin.expectedBody())
        // Its ETag names the new version: the origin's while it streams, the stored file's once the
        // download completed first (a loaded CI run was that slow).
        let completed = try await service.client.request("GET", "/downloads/\(head.header("X-Download-Id") ?? "")")
        let storedETag = (completed.json["sha256"] as? String).map { "\"\($0)\"" }
        #expect(origin.etag() != oldETag && [origin.etag(), storedETag].contains(fresh.header("ETag")), "\(fresh.header("ETag") ?? "none")")
    }

    @Test func anOrigin404IsA502WithItsCode() async throws {
        let origin = try TestOrigin(bodySize: 10)
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: Self.loopback)
        let response = try await Self.fetch(service, origin.url("/missing"))
        #expect(response.status == 502)
        let error = try #require(response.json["error"] as? [String: Any])
        #expect(error["code"] as? String == "http_error")
        #expect(error["httpStatus"] as? Int == 404)
        #expect(response.header("X-Download-Id") != nil)
    }

    @Test func aChecksumMismatchAbortsOneByteShort() async throws {
        let origin = try TestOrigin(bodySize: 1 << 20)
        defer { origin.stop() }
        // Half a second of body: the reader streams while the bytes land, as readers of large files
        // do. (Unthrottled, the download can fail, and its partial be discarded, before the reader
        // first opens the file: it is then aborted at byte 0, which the contract allows too.)
        origin.update { $0.bytesPerSecond = 2 << 20 }
        let service = try await ServiceProcess.start(arguments: Self.loopback)
        let wrong = String(repeating: "0", count: 64)
        let client = try await RawHTTPClient.connect(port: service.port)
        defer { client.close() }
        try await client.send("GET \(Self.path(origin.url))&sha256=\(wrong) HTTP/1.1\r\nHost: t\r\n\r\n")
        let head = try await client.readResponseHead()
        #expect(head.status == 200 && head.header("Content-Length") == "\(1 << 20)")
        let body = try await client.readToEnd()
        let intact = body == Array(origin.expectedBody().dropLast())  // (not a diff of a MiB of bytes)
        #expect(body.count == (1 << 20) - 1 && intact, "every byte but the last, then the connection closes (got \(body.count))")
    }

    /// The same with the size unknown (a chunked origin): the stream trails the file by a byte, so
    /// the last byte is never sent, and the chunked body has no last chunk.
    @Test func sizeUnknownAChecksumMismatchAbortsOneByteShort() async throws {
        let origin = try TestOrigin(bodySize: 1 << 20)
        defer { origin.stop() }
        origin.update {
            $0.bytesPerSecond = 2 << 20
            $0.chunked = true
        }
        let service = try await ServiceProcess.start(arguments: Self.loopback)
        let client = try await RawHTTPClient.connect(port: service.port)
        defer { client.close() }
        try await client.send("GET \(Self.path(origin.url))&sha256=\(String(repeating: "0", count: 64)) HTTP/1.1\r\nHost: t\r\n\r\n")
        let head = try await client.readResponseHead()
        #expect(head.status == 200 && head.header("Transfer-Encoding") == "chunked" && head.header("Content-Length") == nil)
        var body: [UInt8] = []
        var ended = false
        do {
            while let chunk = try await client.readChunk() { body += chunk }
            ended = true
        } catch {}
        #expect(!ended, "no last chunk")
        let intact = body == Array(origin.expectedBody().dropLast())
        #expect(body.count == (1 << 20) - 1 && intact, "every byte but the last (got \(body.count))")
    }

    @Test func theLastReaderLeavingPausesAndANewFetchResumes() async throws {
        let origin = try ServiceLiveTests.originStallingAtOneMiB(bodySize: 2 << 20, seconds: 30)
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: Self.loopback)
        let reader = try await Self.open(service, origin.url)
        let id = try #require(try await reader.readResponseHead().header("X-Download-Id"))
        try await ServiceLiveTests.waitForTheStall(service, id: id)
        reader.close()
        // The first event is the current snapshot: the pause may have landed before the stream opened.
        let paused = try await service.waitForEvent(id: id, "paused") { $0.json["state"] as? String == "paused" }
        #expect(paused["bytesWritten"] as? Int == 1 << 20)
        origin.update { $0.stallBound = 0 }
        let again = try await Self.fetch(service, origin.url)
        #expect(again.status == 200 && again.body == origin.expectedBody())
        let resume = try #require(origin.requests().last)
        #expect(resume.header("Range") == "bytes=\(1 << 20)-" && resume.header("If-Range") == origin.etag())
    }

    @Test func aSlowReaderNeverSlowsTheTransfer() async throws {
        let origin = try TestOrigin(bodySize: 8 << 20)
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: Self.loopback)
        let slow = try await RawHTTPClient.connect(port: service.port, receiveBuffer: 16 << 10)
        defer { slow.close() }
        try await slow.send("GET \(Self.path(origin.url)) HTTP/1.1\r\nHost: t\r\n\r\n")
        let id = try #require(try await slow.readResponseHead().header("X-Download-Id"))
        // The slow reader reads nothing; the download completes regardless.
        let done = try await service.waitForEnd(id: id)
        #expect(done["state"] as? String == "completed")
        let body = try await slow.readExactBody(count: 8 << 20)
        #expect(body == origin.expectedBody())
    }

    /// The origin's type while streaming, and the same once stored (on /fetch and on the file),
    /// never to be sniffed into a page of the service.
    @Test func theOriginsContentTypeStaysOnceStored() async throws {
        let origin = try TestOrigin(bodySize: 5000)
        defer { origin.stop() }
        origin.update { $0.contentType = "text/csv; charset=utf-8" }
        let service = try await ServiceProcess.start(arguments: Self.loopback)
        let streamed = try await Self.fetch(service, origin.url)
        let id = try #require(streamed.header("X-Download-Id"))
        _ = try await service.waitForEvent(id: id, "completed") { $0.event == "completed" }
        let stored = try await Self.fetch(service, origin.url)
        let ranged = try await Self.fetch(service, origin.url, headers: ["Range": "bytes=0-9"])
        let file = try await service.client.request("GET", "/downloads/\(id)/file")
        for (name, response) in [("streamed", streamed), ("stored", stored), ("ranged", ranged), ("file", file)] {
            #expect(response.status == (name == "ranged" ? 206 : 200), "\(name)")
            #expect(response.header("Content-Type") == "text/csv; charset=utf-8", "\(name)")
            #expect(response.header("X-Content-Type-Options") == "nosniff", "\(name)")
        }
        let head = try await service.client.request("HEAD", "/downloads/\(id)/file")
        #expect(head.header("Content-Type") == "text/csv; charset=utf-8")
        // HEAD of an event stream says what GET would: a stream, no length (not an empty body).
        for path in ["/downloads/\(id)/progress", "/events"] {
            let stream = try await service.client.request("HEAD", path)
            #expect(stream.status == 200 && stream.header("Content-Type") == "text/event-stream; charset=utf-8", "\(path)")
            #expect(stream.header("Content-Length") == nil && stream.header("Transfer-Encoding") == "chunked", "\(path)")
        }
    }

    @Test func headNeverStartsADownload() async throws {
        let origin = try TestOrigin(bodySize: 12_345)
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: Self.loopback)
        let head = try await service.client.request("HEAD", Self.path(origin.url))
        #expect(head.status == 200)
        #expect(head.header("Content-Length") == "12345")
        #expect(origin.getCount() == 0)
        #expect(origin.requests().map(\.method) == ["HEAD"])
        let list = try await service.client.request("GET", "/downloads")
        #expect((list.json["downloads"] as? [Any])?.isEmpty == true)
        let missing = try await service.client.request("HEAD", Self.path(origin.url("/nope")))
        #expect(missing.status == 502 && missing.header("X-Download-Id") == nil, "no download: none named")
        // Once a GET made a download of it (failed), the probe's answer names it.
        let failed = try await Self.fetch(service, origin.url("/nope"))
        #expect(failed.status == 502 && failed.header("X-Download-Id") != nil)
        let named = try await service.client.request("HEAD", Self.path(origin.url("/nope")))
        #expect(named.status == 502 && named.header("X-Download-Id") == failed.header("X-Download-Id"))
        // Answered as a GET would: a malformed sha256, a size the origin contradicts.
        #expect(try await service.client.request("HEAD", Self.path(origin.url) + "&sha256=zz").status == 400)
        #expect(try await service.client.request("HEAD", Self.path(origin.url) + "&size=5").status == 502)
        #expect(try await service.client.request("HEAD", Self.path(origin.url) + "&size=12345").status == 200)
        // Expectations contradicting the stored download: 409, naming it.
        let fetched = try await Self.fetch(service, origin.url)
        let conflict = try await service.client.request("HEAD", Self.path(origin.url) + "&size=5")
        #expect(conflict.status == 409 && conflict.header("X-Download-Id") == fetched.header("X-Download-Id"))
        #expect(origin.getCount() == 1, "only the GET fetched")
        // With the sha256 of a stored file, another URL is answered by that file, as its GET would
        // be: no probe of the origin (which does not have it).
        let heads = origin.requests().filter { $0.method == "HEAD" }.count
        let sha = SHA256Hasher.hex(origin.expectedBody())
        let reused = try await service.client.request("HEAD", Self.path(origin.url("/elsewhere")) + "&sha256=\(sha)")
        #expect(reused.status == 200 && reused.header("Content-Length") == "12345", "\(reused.status)")
        #expect(reused.header("X-Download-Id") == fetched.header("X-Download-Id"))
        #expect(origin.requests().filter { $0.method == "HEAD" }.count == heads, "the origin was not asked")
        // The URL's own stored file of another digest: the stored file of the asked digest answers (as the GET's join).
        origin.addResource(path: "/other", size: 5_000)
        let other = try await Self.fetch(service, origin.url("/other"))
        let otherSHA = SHA256Hasher.hex(origin.expectedBody(path: "/other"))
        let crossed = try await service.client.request("HEAD", Self.path(origin.url) + "&sha256=\(otherSHA)")
        #expect(crossed.status == 200 && crossed.header("Content-Length") == "5000", "\(crossed.status)")
        #expect(crossed.header("X-Download-Id") == other.header("X-Download-Id"))
        // The head its GET gets: the origin's strong ETag (the tag a download of it is served
        // under), the file name, ranges.
        origin.addResource(path: "/named/file.bin", size: 3_000)
        let got = try await Self.fetch(service, origin.url("/named/file.bin"))
        let probed = try await service.client.request("HEAD", Self.path(origin.url("/named/file.bin") + "?again"))
        #expect(probed.header("ETag") != nil && probed.header("ETag") == got.header("ETag"))
        #expect(probed.header("Content-Disposition") == got.header("Content-Disposition"))
        #expect(probed.header("Content-Disposition")?.contains("file.bin") == true)
        #expect(probed.header("Accept-Ranges") == "bytes")
    }

    /// HEAD probes hold an outbound connection each: at most 16 per client run at once (the 17th is
    /// `503 busy`), and a client that leaves ends its probe (the connect timeout here is a minute).
    @Test func headProbesAreBoundedAndEndWithTheirClients() async throws {
        let silent = try OriginSocket.silentListenerWithFullQueue()
        defer { silent.descriptors.forEach { close($0) } }
        let origin = try TestOrigin(bodySize: 100)
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: Self.loopback + ["--connect-timeout", "60"])
        var waiting: [RawHTTPClient] = []
        for index in 0..<16 {
            let client = try await RawHTTPClient.connect(port: service.port)
            try await client.send("HEAD \(Self.path("http://127.0.0.1:\(silent.port)/x\(index)")) HTTP/1.1\r\nHost: t\r\n\r\n")
            waiting.append(client)
        }
        let busy = try await eventuallyValue(within: 20) { () async throws -> RawHTTPResponse? in
            let answer = try await service.client.request("HEAD", Self.path(origin.url))
            return answer.status == 503 ? answer : nil
        }
        #expect(busy?.header("Retry-After") == "1")
        for client in waiting { client.close() }
        let served = try await eventuallyValue(within: 15) { () async throws -> RawHTTPResponse? in
            let answer = try await service.client.request("HEAD", Self.path(origin.url))
            return answer.status == 200 ? answer : nil
        }
        #expect(served?.header("Content-Length") == "100")
    }

    @Test func theTokenWorksAsBasicAuthsPassword() async throws {
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: Self.loopback + ["--auth-token", "s3cret"])
        let refused = try await Self.fetch(service, origin.url)
        #expect(refused.status == 401)
        #expect(refused.headers.filter { $0.name.lowercased() == "www-authenticate" }.map(\.value)
                == [#"Bearer realm="download-service""#, #"Basic realm="download-service""#])
        let basic = "Basic " + Data("anyone:s3cret".utf8).base64EncodedString()
        let ok = try await Self.fetch(service, origin.url, headers: ["Authorization": basic])
        #expect(ok.status == 200 && ok.body == origin.expectedBody())
        let wrong = try await Self.fetch(service, origin.url, headers: ["Authorization": "Basic " + Data("x:nope".utf8).base64EncodedString()])
        #expect(wrong.status == 403 && wrong.header("WWW-Authenticate") == nil)
    }

    @Test func realClientsGetTheBody() async throws {
        let origin = try TestOrigin(bodySize: 2 << 20)
        defer { origin.stop() }
        origin.update { $0.bytesPerSecond = 8 << 20 }
        let service = try await ServiceProcess.start(arguments: Self.loopback)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("fetch-clients-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let url = "http://127.0.0.1:\(service.port)\(Self.path(origin.url))"
        let curl = try await run("/usr/bin/curl", ["-fsS", "-o", dir.appendingPathComponent("curl").path, url])
        #expect(curl == 0)
        let wget = try await run("/usr/bin/wget", ["-q", "-O", dir.appendingPathComponent("wget").path, url])
        #expect(wget == 0)
        for name in ["curl", "wget"] {
            #expect(try Data(contentsOf: dir.appendingPathComponent(name)) == Data(origin.expectedBody()), "\(name)")
        }
        let python = FetchLiveTests.venvPython
        if FileManager.default.isExecutableFile(atPath: python) {
            let script = "import httpx,sys; r=httpx.get(sys.argv[1], timeout=30); r.raise_for_status(); open(sys.argv[2],'wb').write(r.content)"
            #expect(try await run(python, ["-c", script, url, dir.appendingPathComponent("httpx").path]) == 0)
            #expect(try Data(contentsOf: dir.appendingPathComponent("httpx")) == Data(origin.expectedBody()))
        } else {
            Issue.record("no Python venv with httpx at \(python): run scripts/setup")
        }
        #expect(origin.getCount() == 1)
    }

    static var venvPython: String {
        (ProcessInfo.processInfo.environment["DOWNLOAD_SERVICE_VENV"]
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cache/download-service-venv").path)
            + "/bin/python"
    }
}

/// Runs a program (bounded: killed after 60 s); its exit status.
func run(_ program: String, _ arguments: [String]) async throws -> Int32 {
    let process = ChildProcess(program, arguments, standardOutput: .null, standardError: .inherit)
    try process.run()
    let deadline = Date().addingTimeInterval(60)
    while process.isRunning {
        if Date() > deadline { process.terminate() }
        try await Task.sleep(nanoseconds: 20_000_000)  // polling a child's exit: no async wait
    }
    return process.terminationStatus ?? -1
}
