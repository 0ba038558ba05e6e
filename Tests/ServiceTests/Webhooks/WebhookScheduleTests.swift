import Foundation
import Testing
@testable import DownloadService
@testable import DownloaderEngine

@Suite struct WebhookScheduleTests {
    @Test(arguments: [
        // (after try, Retry-After seconds, unit, expected delay; nil = give up)
        (1, nil, 0.5, 1.0), (2, nil, 0.5, 2.0), (3, nil, 0.5, 4.0), (11, nil, 0.5, 1024.0),
        (1, nil, 0.0, 0.5), (1, nil, 0.999_999, 1.499_999), (4, nil, 0.0, 4.0), (4, nil, 0.999_999, 11.999_992),
        (12, nil, 0.5, nil), (13, nil, 0.5, nil),
        (1, 120.0, 0.5, 120.0), (5, 0.0, 0.9, 0.0), (3, 3600.0, 0.5, 3600.0), (3, 3601.0, 0.5, 4.0), (12, 10.0, 0.5, nil),
    ] as [(Int, Double?, Double, Double?)])
    func delays(after tries: Int, retryAfter: Double?, unit: Double, expected: Double?) {
        let delay = WebhookSchedule().delay(afterTry: tries, retryAfter: retryAfter, unit: unit)
        if let expected {
            #expect(delay.map { abs($0 - expected) < 1e-6 } == true, "\(String(describing: delay))")
        } else {
            #expect(delay == nil)
        }
    }

    @Test func twelveTriesTakeAboutAnHour() {
        let schedule = WebhookSchedule()
        let shortest = (1..<12).compactMap { schedule.delay(afterTry: $0, retryAfter: nil, unit: 0) }.reduce(0, +)
        let longest = (1..<12).compactMap { schedule.delay(afterTry: $0, retryAfter: nil, unit: 0.999_999) }.reduce(0, +)
        #expect(schedule.maxTries == 12 && schedule.tryTimeout == 10)
        #expect(shortest > 1000 && shortest < 1100 && longest > 3000 && longest < 3100, "\(shortest) \(longest)")
    }

    @Test func retryAfterIsSecondsOrADate() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        #expect(WebhookSchedule.retryAfterSeconds("120", now: now) == 120)
        #expect(WebhookSchedule.retryAfterSeconds(" 0 ", now: now) == 0)
        #expect(WebhookSchedule.retryAfterSeconds(nil, now: now) == nil)
        #expect(WebhookSchedule.retryAfterSeconds("soon", now: now) == nil)
        #expect(WebhookSchedule.retryAfterSeconds("-5", now: now) == nil)
        #expect(WebhookSchedule.retryAfterSeconds("99999999999", now: now) == .infinity)
        #expect(WebhookSchedule.retryAfterSeconds("Tue, 14 Nov 2023 22:15:00 GMT", now: now) == 100)
        #expect(WebhookSchedule.retryAfterSeconds("Tue, 14 Nov 2023 22:00:00 GMT", now: now) == 0)
    }

    /// RFC 4231 test cases 2 and 6 (a key longer than the block).
    @Test func hmacMatchesRFC4231() {
        #expect(HMACSHA256.hex(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        #expect(HMACSHA256.hex(key: [UInt8](repeating: 0xaa, count: 131),
                               message: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8))
                == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }

    @Test(arguments: [
        ("https://hooks.example.com/cb/secret-token?sig=abc", "https://hooks.example.com"),
        ("http://127.0.0.1:8081/hook", "http://127.0.0.1:8081"),
        ("HTTPS://[2001:db8::1]:9443/x?y", "https://[2001:db8::1]:9443"),
        ("not a url", "(invalid URL)"),
    ])
    func callbackURLsShowSchemeAndHostOnly(url: String, shown: String) {
        #expect(CallbackRequest.shown(url) == shown)
    }

    @Test(arguments: [
        (#"{"url":"http://o/x"}"#, nil),
        (#"{"url":"http://o/x","callback":null}"#, nil),
        (#"{"url":"http://o/x","callback":{"url":"https://h/cb"}}"#, "completed,failed"),
        (#"{"url":"http://o/x","callback":{"url":"https://h/cb","events":["failed"]}}"#, "failed"),
        (#"{"url":"http://o/x","callback":{"url":"https://h/cb","events":["completed","completed"]}}"#, "completed"),
        (#"{"url":"http://o/x","callback":"https://h/cb"}"#, "invalid_callback"),
        (#"{"url":"http://o/x","callback":{}}"#, "invalid_callback"),
        (#"{"url":"http://o/x","callback":{"url":7}}"#, "invalid_callback"),
        (#"{"url":"http://o/x","callback":{"url":"ftp://h/cb"}}"#, "invalid_callback"),
        (#"{"url":"http://o/x","callback":{"url":"/relative"}}"#, "invalid_callback"),
        (#"{"url":"http://o/x","callback":{"url":"https://u:p@h/cb"}}"#, "invalid_callback"),
        (#"{"url":"http://o/x","callback":{"url":"https://h/cb","events":[]}}"#, "invalid_callback"),
        (#"{"url":"http://o/x","callback":{"url":"https://h/cb","events":["paused"]}}"#, "invalid_callback"),
        (#"{"url":"http://o/x","callback":{"url":"https://h/cb","events":"completed"}}"#, "invalid_callback"),
        (#"{"url":"http://o/x","callback":{"url":"https://h/cb","secret":"x"}}"#, "invalid_callback"),
    ] as [(String, String?)])
    func callbackBodies(body: String, expected: String?) {
        switch CallbackBody.parse(Array(body.utf8)) {
        case .success(let callback):
            #expect(callback.map { $0.events.sorted().map(\.rawValue).joined(separator: ",") } == expected)
        case .failure(let error):
            #expect(error.code == expected && error.status == 400, "\(error)")
        }
    }

    @Test func longCallbackURLsAreRefused() {
        let url = "https://h/" + String(repeating: "a", count: CallbackBody.maxURLBytes)
        guard case .failure(let error) = CallbackBody.parse(Array(#"{"url":"http://o/x","callback":{"url":"\#(url)"}}"#.utf8)) else {
            Issue.record("accepted a callback URL over \(CallbackBody.maxURLBytes) bytes")
            return
        }
        #expect(error.code == "invalid_callback")
    }
}

@Suite struct WebhookSecretOptionTests {
    @Test func theSecretComesFromTheFlagTheVariableOrAFile() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("webhook-secret-\(UUID().uuidString)")
        try Data("from-file\n".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        func secret(_ arguments: [String], _ environment: [String: String] = [:]) throws -> String? {
            guard case .run(let c) = CommandLineOptions.parse(arguments: arguments, environment: environment.merging(["HOME": "/h"]) { $1 }) else {
                Issue.record("\(arguments) did not parse")
                return nil
            }
            return try c.webhookSecretBytes().map { String(decoding: $0, as: UTF8.self) }
        }
        #expect(try secret([]) == nil)
        #expect(try secret(["--webhook-secret", "from-flag"]) == "from-flag")
        #expect(try secret([], ["DOWNLOAD_SERVICE_WEBHOOK_SECRET": "from-env"]) == "from-env")
        #expect(try secret(["--webhook-secret-file", file.path], ["DOWNLOAD_SERVICE_WEBHOOK_SECRET": "from-env"]) == "from-file")
        #expect(throws: CommandLineOptions.ParseError.self) { try secret(["--webhook-secret-file", file.path + ".missing"]) }
        guard case .invalid = CommandLineOptions.parse(arguments: ["--webhook-secret", ""], environment: ["HOME": "/h"]) else {
            Issue.record("an empty secret was accepted")
            return
        }
        #expect(CommandLineOptions.usage.contains("--webhook-secret-file") && CommandLineOptions.usage.contains("DOWNLOAD_SERVICE_WEBHOOK_SECRET"))
    }
}

/// Tokens from mounted secrets (`--auth-token-file`, `--admin-token-file`, and their variables),
/// and the variables that name no option (a misspelt one would otherwise leave the service open
/// without a word).
@Suite struct TokenFileOptionTests {
    @Test func tokensComeFromFilesAndUnknownVariablesAreNamed() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("token-files-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let (caller, admin, empty) = (dir.appendingPathComponent("caller"), dir.appendingPathComponent("admin"), dir.appendingPathComponent("empty"))
        try Data("caller-secret\n".utf8).write(to: caller)
        try Data([0xEF, 0xBB, 0xBF] + Array(" admin-secret \r\n\n".utf8)).write(to: admin)  // a BOM, blanks, two line ends
        try Data("\n".utf8).write(to: empty)
        let environment = ["HOME": "/h", "DOWNLOAD_SERVICE_AUTH_TOKEN": "from-env", "DOWNLOAD_SERVICE_ADMIN_TOKEN_FILE": admin.path,
                           "DOWNLOAD_SERVICE_AUTHTOKEN": "misspelt", "DOWNLOAD_SERVICE_TEST_CRASH_POINT": "x"]
        guard case .run(let c) = CommandLineOptions.parse(arguments: ["--auth-token-file", caller.path], environment: environment) else {
            Issue.record("not parsed"); return
        }
        #expect(c.authToken == "caller-secret" && c.adminToken == "admin-secret", "the files win, without what a header could not carry")
        #expect(c.unknownVariables == ["DOWNLOAD_SERVICE_AUTHTOKEN"])
        for bad in [["--auth-token-file", empty.path], ["--admin-token-file", dir.appendingPathComponent("missing").path]] {
            guard case .invalid(let message) = CommandLineOptions.parse(arguments: bad, environment: ["HOME": "/h"]) else {
                Issue.record("\(bad) was accepted"); continue
            }
            #expect(message.hasPrefix(bad[0]), "\(message)")
        }
        #expect(CommandLineOptions.usage.contains("DOWNLOAD_SERVICE_AUTH_TOKEN_FILE"))
        // An error names the file, never what it holds.
        let blank = dir.appendingPathComponent("blank")
        try Data("  \t \n".utf8).write(to: blank)
        guard case .invalid(let message) = CommandLineOptions.parse(arguments: ["--auth-token-file", blank.path], environment: ["HOME": "/h"]) else {
            Issue.record("a blank token was accepted"); return
        }
        #expect(message.contains("holds no token") && !message.contains("\t"))
    }
}
