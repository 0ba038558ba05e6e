/// Whether a body is the expected bytes, with a short account when it is not (sizes, the first
/// differing offset). A check on a big body goes through this, never `#expect(body == expected)`:
/// on a failure Swift Testing diffs the two arrays, which for megabytes runs on for many minutes
/// (a failing check of an 8 MiB body kept a parallel run of the cluster suites busy past 15 min).
struct BodyMatch: CustomStringConvertible {
    let same: Bool
    let description: String

    init(_ got: [UInt8], _ expected: [UInt8]) {
        same = got == expected
        guard !same else {
            description = "\(got.count) bytes as expected"
            return
        }
        let first = zip(got, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(got.count, expected.count)
        description = "\(got.count) bytes, expected \(expected.count); first difference at \(first)"
    }
}
