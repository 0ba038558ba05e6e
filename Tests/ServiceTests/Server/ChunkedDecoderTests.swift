import Testing
@testable import MiniHTTPServer

@Suite("ChunkedDecoder")
struct ChunkedDecoderTests {
    /// Feeds `input` in pieces of `step` bytes, keeping unconsumed bytes like the connection does.
    static func decode(_ input: String, step: Int = .max, maxBody: Int = 1 << 20) -> (body: String, result: ChunkedDecoder.Result) {
        var decoder = ChunkedDecoder(maxBodyBytes: maxBody, maxLineBytes: 64, maxTrailerBytes: 128)
        let bytes = Array(input.utf8)
        var pending: [UInt8] = []
        var body: [UInt8] = []
        var offset = 0
        var last = ChunkedDecoder.Result.needMoreData(consumed: 0)
        while offset < bytes.count {
            let end = min(bytes.count, offset + step)
            pending += bytes[offset..<end]
            offset = end
            last = pending.withUnsafeBufferPointer { decoder.feed($0, into: &body) }
            switch last {
            case .needMoreData(let consumed): pending.removeFirst(consumed)
            case .done(let consumed):
                pending.removeFirst(consumed)
                return (String(decoding: body, as: UTF8.self), .done(consumed: pending.count))
            case .invalid: return (String(decoding: body, as: UTF8.self), last)
            }
        }
        return (String(decoding: body, as: UTF8.self), last)
    }

    @Test(arguments: [1, 2, 3, 7, 1000])
    func decodesInAnyPieces(step: Int) {
        let (body, result) = Self.decode("5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\nNEXT", step: step)
        #expect(body == "hello world")
        #expect(result == .done(consumed: "NEXT".utf8.count) || step < 1000)
        if case .done = result {} else { Issue.record("not done: \(result)") }
    }

    @Test func uppercaseHexAndLeftover() {
        let (body, result) = Self.decode("A\r\n0123456789\r\n0\r\n\r\nGET")
        #expect(body == "0123456789")
        #expect(result == .done(consumed: 3))
    }

    struct Bad: Sendable, CustomStringConvertible {
        var input: String
        var status: Int
        var description: String { input.debugDescription }
    }

    @Test(arguments: [
        Bad(input: "z\r\n", status: 400),
        Bad(input: "\r\n", status: 400),
        Bad(input: "5\r\nhelloXX", status: 400),
        Bad(input: "5\nhello\r\n", status: 400),
        Bad(input: "fffffffffffffffff\r\n", status: 400),
        Bad(input: "5 x\r\n", status: 400),
        Bad(input: "1;" + String(repeating: "e", count: 100), status: 400),
        Bad(input: "0\r\n" + String(repeating: "T: v\r\n", count: 40), status: 431),
        Bad(input: "0\r\nno colon here\r\n\r\n", status: 400),
        Bad(input: "100001\r\n", status: 413),
    ])
    func rejects(_ bad: Bad) {
        let (_, result) = Self.decode(bad.input, maxBody: 1 << 20)
        guard case .invalid(let failure) = result else { Issue.record("accepted: \(result)"); return }
        #expect(failure.status == bad.status)
    }

    /// Found by `scripts/fuzz-parser`: a line of exactly the limit was rejected when its LF arrived
    /// in a later read than its CR, and accepted when both came together.
    @Test(arguments: [1, 2, 65, 66, 1000])
    func lineOfExactlyTheLimitIsAcceptedHoweverItArrives(step: Int) {
        let line = "1;" + String(repeating: "e", count: 62)  // 64 bytes, the test decoder's maxLineBytes
        let (body, result) = Self.decode(line + "\r\nx\r\n0\r\n\r\n", step: step)
        #expect(body == "x")
        #expect(result == .done(consumed: 0))
        let (_, tooLong) = Self.decode(line + "e\r\nx\r\n0\r\n\r\n", step: step)
        guard case .invalid(let failure) = tooLong else { Issue.record("accepted: \(tooLong)"); return }
        #expect(failure.status == 400)
    }

    @Test func totalSizeIsBoundedAcrossChunks() {
        let (_, result) = Self.decode("8\r\n12345678\r\n8\r\n12345678\r\n", maxBody: 10)
        guard case .invalid(let failure) = result else { Issue.record("accepted"); return }
        #expect(failure.status == 413)
    }
}
