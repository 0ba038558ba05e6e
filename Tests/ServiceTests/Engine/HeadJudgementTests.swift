import Testing
@testable import DownloaderEngine

/// The limits on an accepted head: a file over `--max-file-size` or of another size than the caller
/// expects fails; the kept bytes stay only when they are of the same version (a `206` to the resume).
@Suite struct HeadJudgementTests {
    static let resume = ResumePlan.request(kept: 100, validator: Validator(etag: "\"v1\""))
    static let fresh = ResumePlan.request(kept: 0, validator: nil)
    static let tooLarge = "the file has 5000 bytes, more than the limit of 1000"

    @Test(arguments: [
        // (plan, status, headers, max file size, expected size, judgement)
        (resume, 206, ["Content-Range": "bytes 100-4999/5000", "ETag": "\"v1\""], 1000, nil,
         HeadJudgement.refuse(.fail(DownloadFailure(code: .tooLarge, message: tooLarge), discard: false))),
        (resume, 200, ["Content-Length": "5000", "ETag": "\"v2\""], 1000, nil,
         .refuse(.fail(DownloadFailure(code: .tooLarge, message: tooLarge), discard: true))),
        (fresh, 200, ["Content-Length": "5000"], 1000, nil,
         .refuse(.fail(DownloadFailure(code: .tooLarge, message: tooLarge), discard: false))),
        (resume, 200, ["Content-Length": "900"], 1000, nil, .accept(offset: 0, total: 900)),
        (resume, 206, ["Content-Range": "bytes 100-899/900", "ETag": "\"v1\""], 1000, nil, .accept(offset: 100, total: 900)),
        (fresh, 200, [:], 1000, nil, .accept(offset: 0, total: nil)),
        (resume, 200, ["Content-Length": "900"], nil, 800,
         .refuse(.fail(DownloadFailure(code: .sizeMismatch, message: "the origin announces 900 bytes, expected 800"), discard: true))),
        (resume, 206, ["Content-Range": "bytes 100-899/900", "ETag": "\"v1\""], nil, 900, .accept(offset: 100, total: 900)),
    ] as [(ResumePlan.Request, Int, [String: String], Int64?, Int64?, HeadJudgement)])
    func limits(plan: ResumePlan.Request, status: Int, fields: [String: String], maxFileSize: Int64?, expectedSize: Int64?,
                expected: HeadJudgement) {
        let head = ResumePlanTests.head(status, fields)
        let judgement = HeadJudgement.judge(head, plan: plan, sentValidator: plan.offset > 0 ? Validator(etag: "\"v1\"") : nil,
                                            knownTotal: nil, maxFileSize: maxFileSize, expectedSize: expectedSize)
        #expect(judgement == expected)
    }
}
