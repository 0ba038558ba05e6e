import Testing
@testable import DownloaderEngine

/// When an accepted body starts a new version (a new generation: `/fetch` readers of the old one are
/// aborted) and when its readers go on.
struct BodyVersionTests {
    static let a = Validator(etag: "\"a\"", lastModified: nil)
    static let b = Validator(etag: "\"b\"", lastModified: nil)

    @Test(arguments: [
        // offset, kept at start, generation, current, offered, new version?
        (0, 0, 0, nil, a, true),          // the first body is the first version
        (100, 100, 0, nil, a, true),      // also when it resumes a recovered partial
        (100, 100, 1, a, a, false),       // a ranged body continues the file
        (100, 100, 1, a, nil, false),
        (0, 100, 1, a, a, true),          // a full body replacing kept bytes: new, whatever it names
        (0, 0, 1, a, b, true),            // nothing kept, another validator: new
        (0, 0, 1, a, nil, true),          // nothing kept, no validator: can't be the same
        (0, 0, 1, nil, nil, true),
        (0, 0, 1, a, a, false),           // nothing kept, the same strong validator: readers go on
    ] as [(Int64, Int64, UInt64, Validator?, Validator?, Bool)])
    func isNew(offset: Int64, kept: Int64, generation: UInt64, current: Validator?, offered: Validator?, expected: Bool) {
        #expect(BodyVersion.isNew(offset: offset, keptAtStart: kept, generation: generation, current: current, offered: offered) == expected)
    }
}
