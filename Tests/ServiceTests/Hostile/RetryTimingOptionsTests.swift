import Testing
@testable import DownloadService

/// The retry-timing flags the fault soak uses, and their environment variables.
@Suite struct RetryTimingOptionsTests {
    @Test func flagsReachTheEngineConfiguration() throws {
        let outcome = CommandLineOptions.parse(
            arguments: ["--stall-timeout", "0.25", "--retry-base-delay=0", "--max-attempts", "9"], environment: ["HOME": "/h"])
        guard case .run(let c) = outcome else { Issue.record("\(outcome)"); return }
        let engine = c.engineConfiguration
        #expect(engine.stallTimeout == 0.25 && engine.retryBaseDelay == 0 && engine.maxAttempts == 9)
    }

    @Test func defaultsAreTheEngineDefaults() throws {
        guard case .run(let c) = CommandLineOptions.parse(arguments: [], environment: ["HOME": "/h"]) else { Issue.record("invalid"); return }
        #expect(c.engineConfiguration.stallTimeout == 30 && c.engineConfiguration.retryBaseDelay == 0.5)
        #expect(c.engineConfiguration.maxAttempts == 6)
    }

    @Test func environmentVariables() throws {
        let env = ["HOME": "/h", "DOWNLOAD_SERVICE_STALL_TIMEOUT": "2", "DOWNLOAD_SERVICE_MAX_ATTEMPTS": "3"]
        guard case .run(let c) = CommandLineOptions.parse(arguments: [], environment: env) else { Issue.record("invalid"); return }
        #expect(c.stallTimeout == 2 && c.maxAttempts == 3)
    }

    @Test(arguments: [["--stall-timeout", "0"], ["--stall-timeout", "nan"], ["--retry-base-delay", "-1"],
                      ["--max-attempts", "0"], ["--max-attempts", "x"]])
    func rejectsBadValues(_ arguments: [String]) {
        guard case .invalid = CommandLineOptions.parse(arguments: arguments, environment: ["HOME": "/h"]) else {
            Issue.record("accepted \(arguments)")
            return
        }
    }
}
