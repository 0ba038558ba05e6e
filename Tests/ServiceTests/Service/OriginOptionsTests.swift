import DownloaderEngine
import MiniHTTPServer
import Foundation
import Testing
@testable import DownloadService

/// The options about origins and the log: flags and `DOWNLOAD_SERVICE_*` variables, what they
/// become, what is refused, and what the service says about them.
@Suite struct OriginOptionsTests {
    static func parse(_ arguments: [String], _ environment: [String: String] = [:]) -> CommandLineOptions.Outcome {
        CommandLineOptions.parse(arguments: arguments, environment: ["HOME": "/h"].merging(environment) { $1 })
    }

    @Test func flagsReachTheEngine() throws {
        let outcome = Self.parse(["--ca-file", "/etc/corp/ca.pem", "--upstream-proxy", "http://u:p@proxy.corp:3128",
                                  "--no-proxy", "files.corp, *.internal,10.0.0.0/8", "--connect-timeout", "4",
                                  "--head-timeout=12.5", "--log-level", "warn", "--log-format", "text"])
        guard case .run(let c) = outcome else { Issue.record("\(outcome)"); return }
        let engine = c.engineConfiguration
        #expect(engine.caFile == "/etc/corp/ca.pem")
        #expect(engine.upstreamProxy == "http://u:p@proxy.corp:3128")
        #expect(engine.noProxy == ["files.corp", "*.internal", "10.0.0.0/8"])
        #expect(engine.connectTimeout == 4 && engine.headTimeout == 12.5)
        #expect(c.logLevel == .warning && c.logFormat == .text)
        #expect(c.redactedProxy == "http://***@proxy.corp:3128")
    }

    @Test func environmentVariables() throws {
        let outcome = Self.parse([], ["DOWNLOAD_SERVICE_UPSTREAM_PROXY": "https://proxy.corp", "DOWNLOAD_SERVICE_NO_PROXY": "a.corp",
                                      "DOWNLOAD_SERVICE_LOG_LEVEL": "debug", "DOWNLOAD_SERVICE_LOG_FORMAT": "json",
                                      "DOWNLOAD_SERVICE_CONNECT_TIMEOUT": "3", "DOWNLOAD_SERVICE_HEAD_TIMEOUT": "7",
                                      "DOWNLOAD_SERVICE_CA_FILE": "/ca.pem"])
        guard case .run(let c) = outcome else { Issue.record("\(outcome)"); return }
        #expect(c.upstreamProxy == "https://proxy.corp" && c.noProxy == ["a.corp"] && c.caFile == "/ca.pem")
        #expect(c.logLevel == .debug && c.logFormat == .json && c.connectTimeout == 3 && c.headTimeout == 7)
    }

    @Test func defaults() throws {
        guard case .run(let c) = Self.parse([]) else { Issue.record("invalid"); return }
        #expect(c.engineConfiguration.connectTimeout == 10 && c.engineConfiguration.headTimeout == 30)
        #expect(c.engineConfiguration.upstreamProxy == nil && c.engineConfiguration.caFile == nil)
        #expect(c.logLevel == .info && c.logFormat == nil)
    }

    @Test func theEnvironmentsProxyVariablesAreNeverUsedOnlyNamed() throws {
        let environment = ["HTTPS_PROXY": "http://user:secret@evil:3128", "no_proxy": "x", "PATH": "/bin"]
        guard case .run(let c) = Self.parse([], environment) else { Issue.record("invalid"); return }
        #expect(c.upstreamProxy == nil)
        #expect(CommandLineOptions.ignoredProxyVariables(in: environment) == ["HTTPS_PROXY", "no_proxy"])
    }

    @Test(arguments: [
        (["--upstream-proxy", "socks5://u:pw@proxy:1080"], "--upstream proxy: the scheme must be http or https"),
        (["--no-proxy", "bad host"], "--no-proxy: entry 'bad host': expected a host name, *.domain, an address or a network"),
        (["--log-level", "loud"], "--log-level must be debug, info, warn or error, got 'loud'"),
        (["--log-format", "xml"], "--log-format must be json or text, got 'xml'"),
        (["--head-timeout", "0"], "--head-timeout must be seconds in 0.05-3600.0, got '0'"),
        (["--ca-file", ""], "--ca-file needs a path"),
    ])
    func badValuesAreRefusedClearly(_ arguments: [String], _ message: String) {
        #expect(Self.parse(arguments) == .invalid(message))
    }

    @Test func versionNamesTheServiceAndItsLibraries() {
        #expect(Self.parse(["--version"]) == .version)
        let lines = ServiceVersion.report.split(separator: "\n").map(String.init)
        #expect(lines.count == 5)
        #expect(lines[0] == "download-service \(ServiceVersion.current)")
        #expect(lines[1].hasPrefix("libcurl \(LinkedLibraries.curl) (OpenSSL/"), "\(lines)")
        #expect(lines[2].hasPrefix("TLS library: OpenSSL "), "\(lines)")
        #expect(lines[3].wholeMatch(of: /SQLite 3\.\d+\.\d+/) != nil, "\(lines)")
        #expect(lines[4].wholeMatch(of: /libpq \d+\.\d+/) != nil, "\(lines)")
        #expect(CommandLineOptions.usage.contains("--version"))
    }

    @Test func theLogDropsLinesBelowItsLevel() {
        let lines = OriginLock<[String]>([])
        let logger = Logger(sink: { line in lines.withLock { $0.append(line) } }, minimumLevel: .warning)
        logger.info("quiet")
        logger.debug("quieter")
        logger.warning("loud", ["n": 1])
        logger.request(AccessLogEntry(method: "GET", path: "/", status: 200, bytes: 0, durationSeconds: 0, remoteAddress: "x"))
        logger.error("louder")
        let seen = lines.withLock { $0 }
        #expect(seen.count == 2)
        #expect(seen.first?.contains(#""msg":"loud""#) == true)
    }

    @Test func theTextFormatIsForPeople() {
        let lines = OriginLock<[String]>([])
        let logger = Logger(sink: { line in lines.withLock { $0.append(line) } }, format: .text)
        let date = Date(timeIntervalSince1970: 1_796_000_000)
        logger.log(.info, "listening", ["port": 8080, "host": "::", "dir": "/var/lib/a b", "list": ["x"]], at: date)
        logger.request(AccessLogEntry(method: "GET", path: "/healthz", status: 200, bytes: 15, durationSeconds: 0.0012,
                                      remoteAddress: "127.0.0.1:5"), at: date)
        let seen = lines.withLock { $0 }
        #expect(seen == [
            #"2026-11-30T00:53:20.000Z INFO  listening dir="/var/lib/a b" host=:: list=["x"] port=8080"#,
            "2026-11-30T00:53:20.000Z INFO  request bytes=15 durationMs=1.2 method=GET path=/healthz remote=127.0.0.1:5 status=200",
        ])
    }

    @Test func aServiceWithAnUnreadableCAFileStopsAtStartWithAClearMessage() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ds-\(UUID().uuidString)")
        let service = try? await ServiceProcess.start(root: root, arguments: ["--ca-file", "/nonexistent/ca.pem"])
        #expect(service == nil)
        let errors = try ChildPipe()
        let process = ChildProcess(try ServiceProcess.executable().path,
                                   ["--port", "0", "--state-dir", root.path + "/s", "--cache-dir", root.path + "/c",
                                    "--data-dir", root.path + "/d", "--ca-file", "/nonexistent/ca.pem"],
                                   standardOutput: .inherit, standardError: .pipe(errors))
        try process.run()
        let text = try await onThread { errors.readText(timeout: 30) }
        let exited = try await onThread { process.waitUntilExit(timeout: 30) }
        #expect(exited && process.terminationStatus != 0)
        #expect(text.contains("CA file /nonexistent/ca.pem cannot be read: No such file or directory"), "\(text)")
    }

    @Test func theStartUpLineNamesTheProxyRedactedAndTheIgnoredVariables() async throws {
        let service = try await ServiceProcess.start(
            arguments: ["--upstream-proxy", "http://fetcher:s3cret@127.0.0.1:9", "--no-proxy", "files.corp"],
            environment: ["HTTPS_PROXY": "http://x:leaked@elsewhere:3128", "no_proxy": "*"])
        try await service.stop()
        let listening = try #require(service.logLines.first { $0.contains(#""msg":"listening""#) })
        let object = try #require(try JSONSerialization.jsonObject(with: Data(listening.utf8)) as? [String: Any])
        #expect(object["upstreamProxy"] as? String == "http://***@127.0.0.1:9")
        #expect(object["noProxy"] as? [String] == ["files.corp"])
        #expect(object["ignoredProxyVariables"] as? [String] == ["HTTPS_PROXY", "no_proxy"])
        #expect(object["connectTimeout"] as? Int == 10 && object["headTimeout"] as? Int == 30)
        let everything = service.logLines.joined()
        #expect(!everything.contains("s3cret") && !everything.contains("leaked"))
    }
}
