import DownloaderEngine
import Testing
@testable import DownloadService

/// The service's pure parts of issue 15: who reads a private download, the `headers` field, the option.
@Suite struct CredentialsPureTests {
    @Test(arguments: [
        // private, shows a caller token, operator → reads, listed
        (false, false, false, true, true),
        (true, false, false, false, false),
        (true, true, false, true, false),
        (true, false, true, true, true),
        (true, true, true, true, true),
    ])
    func access(isPrivate: Bool, token: Bool, isOperator: Bool, reads: Bool, listed: Bool) {
        let access = DownloadAccess(isPrivate: isPrivate, showsCallerToken: token, isOperator: isOperator)
        #expect(access.allowsReading == reads && access.allowsListing == listed)
    }

    @Test func headersAreParsedAsAnObjectOfStrings() throws {
        let parsed = try CreateDownloadBody.parse(Array(#"{"url":"http://o.test/f","headers":{"Authorization":"Bearer x"}}"#.utf8)).get()
        #expect(parsed.headers == ["Authorization": "Bearer x"])
        for bad in [#"{"url":"http://o","headers":{"A":1}}"#, #"{"url":"http://o","headers":["A"]}"#, #"{"url":"http://o","headers":"A: b"}"#] {
            guard case .failure(let error) = CreateDownloadBody.parse(Array(bad.utf8)) else { Issue.record("accepted \(bad)"); continue }
            #expect(error.status == 400 && error.code == "invalid_headers", "\(bad)")
        }
        #expect(try CreateDownloadBody.parse(Array(#"{"url":"http://o","headers":null}"#.utf8)).get().headers.isEmpty)
    }

    @Test func invalidHeadersIsA400() {
        #expect(APIError(engineError: .invalidHeaders("x")).status == 400)
    }

    @Test func theIgnoreQueryOption() {
        let outcome = CommandLineOptions.parse(arguments: ["--coalesce-ignore-query", "X-Amz-Signature, Expires", "--coalesce-ignore-query=Signature"],
                                               environment: ["HOME": "/h"])
        guard case .run(let c) = outcome else { Issue.record("\(outcome)"); return }
        #expect(c.engineConfiguration.coalesceIgnoreQuery == ["X-Amz-Signature", "Expires", "Signature"])
        let fromEnvironment = CommandLineOptions.parse(arguments: [], environment: ["HOME": "/h", "DOWNLOAD_SERVICE_COALESCE_IGNORE_QUERY": "Sig"])
        guard case .run(let e) = fromEnvironment else { Issue.record("\(fromEnvironment)"); return }
        #expect(e.engineConfiguration.coalesceIgnoreQuery == ["Sig"])
        for bad in ["", "a=b", "a b", "x&y"] {
            if case .run = CommandLineOptions.parse(arguments: ["--coalesce-ignore-query", bad], environment: ["HOME": "/h"]) {
                Issue.record("accepted '\(bad)'")
            }
        }
        #expect(CommandLineOptions.parse(arguments: [], environment: ["HOME": "/h"]).runConfiguration?.engineConfiguration.coalesceIgnoreQuery == [])
    }
}

private extension CommandLineOptions.Outcome {
    var runConfiguration: ServiceConfiguration? {
        if case .run(let c) = self { return c }
        return nil
    }
}
