/// How `Connection.process` drives `RequestParser` and `ChunkedDecoder`, without sockets: bytes
/// arrive in pieces, unconsumed bytes stay buffered, heads and bodies come out as `FuzzEvent`s.
/// A rejected request stops the model, as the connection closes.
struct ConnectionModel {
    let profile: FuzzProfile
    private var parser: RequestParser
    private var inbound: [UInt8] = []
    private var framing: BodyFraming?
    private var decoder: ChunkedDecoder?
    private var body: [UInt8] = []
    private(set) var events: [FuzzEvent] = []
    private(set) var stopped = false
    static let maxRequests = 32

    init(profile: FuzzProfile) {
        self.profile = profile
        self.parser = RequestParser(limits: profile.parser)
    }

    mutating func receive(_ bytes: ArraySlice<UInt8>) {
        guard !stopped else { return }
        inbound += bytes
        let input = inbound
        let used = input.withUnsafeBufferPointer { process($0) }
        fuzzCheck(used <= input.count, "used \(used) of \(input.count)")
        inbound = stopped ? [] : Array(input[used...])
    }

    private mutating func process(_ input: UnsafeBufferPointer<UInt8>) -> Int {
        var used = 0
        while used < input.count && !stopped {
            let rest = UnsafeBufferPointer(rebasing: input[used...])
            guard let framing else {
                switch parser.parse(rest) {
                case .needMoreData:
                    return used
                case .invalid(let failure):
                    checkFailure(failure)
                    stop(.invalid)
                    return input.count
                case .head(let head, let consumed):
                    events.append(.head(describe(head, consumed: consumed, available: rest.count, profile: profile)))
                    used += consumed
                    parser.reset()
                    body = []
                    self.framing = head.framing
                    decoder = head.framing == .chunked
                        ? ChunkedDecoder(maxBodyBytes: profile.parser.maxBodyBytes, maxLineBytes: profile.chunkLineBytes,
                                         maxTrailerBytes: profile.trailerBytes)
                        : nil
                    if head.framing == .none { finishRequest() }
                }
                continue
            }
            switch framing {
            case .length(let length):
                let take = min(length - body.count, rest.count)
                body.append(contentsOf: UnsafeBufferPointer(rebasing: rest[..<take]))
                used += take
                if body.count == length { finishRequest() }
            case .chunked:
                guard var d = decoder else { fatalError("chunked framing without a decoder") }
                let result = d.feed(rest, into: &body)
                decoder = d
                fuzzCheck(d.decodedBytes <= profile.parser.maxBodyBytes, "decoded \(d.decodedBytes) bytes")
                fuzzCheck(body.count <= d.decodedBytes, "body \(body.count) beyond declared \(d.decodedBytes)")
                switch result {
                case .needMoreData(let consumed):
                    fuzzCheck(consumed <= rest.count, "chunk consumed \(consumed) of \(rest.count)")
                    return used + consumed
                case .done(let consumed):
                    fuzzCheck(consumed > 0 && consumed <= rest.count, "chunk done at \(consumed) of \(rest.count)")
                    fuzzCheck(body.count == d.decodedBytes, "body \(body.count) != declared \(d.decodedBytes)")
                    used += consumed
                    finishRequest()
                case .invalid(let failure):
                    checkFailure(failure)
                    stop(.invalid)
                    return input.count
                }
            case .none:
                fatalError("a bodyless request is finished at once")
            }
        }
        return used
    }

    private mutating func finishRequest() {
        if framing != BodyFraming.none, framing != nil { events.append(.body(body)) }
        framing = nil
        decoder = nil
        body = []
        if events.count >= 2 * Self.maxRequests { stopped = true }
    }

    private mutating func stop(_ event: FuzzEvent) {
        events.append(event)
        stopped = true
    }
}

/// Feeds `input` to a fresh model in pieces whose ends are `cuts` (ascending, last = count).
func runModel(_ input: [UInt8], profile: FuzzProfile, cuts: [Int]) -> [FuzzEvent] {
    var model = ConnectionModel(profile: profile)
    var from = 0
    for to in cuts where to > from {
        model.receive(input[from..<to])
        from = to
        if model.stopped { break }
    }
    return model.events
}

/// The chunked decoder alone over `input` (a raw body), whole or in pieces; the outcome and body.
func runDecoder(_ input: [UInt8], profile: FuzzProfile, cuts: [Int]) -> String {
    var decoder = ChunkedDecoder(maxBodyBytes: profile.parser.maxBodyBytes, maxLineBytes: profile.chunkLineBytes,
                                 maxTrailerBytes: profile.trailerBytes)
    var buffered: [UInt8] = []
    var body: [UInt8] = []
    var from = 0
    for to in cuts where to > from {
        buffered += input[from..<to]
        from = to
        let result = buffered.withUnsafeBufferPointer { decoder.feed($0, into: &body) }
        fuzzCheck(decoder.decodedBytes <= profile.parser.maxBodyBytes, "decoded \(decoder.decodedBytes)")
        switch result {
        case .needMoreData(let consumed):
            fuzzCheck(consumed <= buffered.count, "consumed \(consumed) of \(buffered.count)")
            buffered.removeFirst(consumed)
        case .done(let consumed):
            fuzzCheck(consumed <= buffered.count && body.count == decoder.decodedBytes, "done")
            return "done \(body) rest=\(buffered.count - consumed + (input.count - to))"
        case .invalid(let failure):
            checkFailure(failure)
            return "invalid"
        }
    }
    return "more \(body.count)"
}

/// Cut points: pieces of random size (often 1 byte), derived from the input's hash.
func randomCuts(count: Int, seed: UInt64) -> [Int] {
    var random = FuzzRandom(state: seed)
    var cuts: [Int] = []
    var at = 0
    while at < count {
        let r = random.next()
        let size = r % 4 == 0 ? 1 : 1 + Int((r >> 8) % UInt64(max(1, count / 3)))
        at = min(count, at + size)
        cuts.append(at)
    }
    return cuts
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzParser(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    let hash = input.withUnsafeBufferPointer(fuzzHash)
    let whole = [input.count]
    let split = randomCuts(count: input.count, seed: hash)
    let trickle = input.count <= 512 ? Array(stride(from: 1, through: input.count, by: 1)) : nil
    for profile in [FuzzProfile.defaults, FuzzProfile.tiny(hash)] {
        let reference = runModel(input, profile: profile, cuts: whole)
        let pieces = runModel(input, profile: profile, cuts: split)
        fuzzCheck(pieces == reference, "split feeding differs:\n\(pieces)\nvs whole:\n\(reference)")
        if let trickle {
            let bytes = runModel(input, profile: profile, cuts: trickle)
            fuzzCheck(bytes == reference, "byte-by-byte feeding differs:\n\(bytes)\nvs whole:\n\(reference)")
        }
        let decoded = runDecoder(input, profile: profile, cuts: whole)
        let decodedSplit = runDecoder(input, profile: profile, cuts: split)
        fuzzCheck(decoded == decodedSplit, "chunked split differs: \(decodedSplit) vs \(decoded)")
        if let trickle {
            let decodedBytes = runDecoder(input, profile: profile, cuts: trickle)
            fuzzCheck(decoded == decodedBytes, "chunked byte-by-byte differs: \(decodedBytes) vs \(decoded)")
        }
    }
    return 0
}
