/// Who fetches what in a segmented attempt (`SegmentCrew`, under its lock): the pieces, the
/// connections running (the prefix's own transfer and one fetch per piece being fetched), the
/// connection probe, and the decisions they make: which pieces to launch as bytes arrive and as
/// connections end, when a cut piece is asked for again and when everything stops. No I/O: a
/// fetch's place (`SegmentSlot`) is taken here, its transfer started by the crew.
struct CrewRoster {
    static let retriesPerSegment = 3

    var pieces: PieceBook
    /// The connections after the prefix, by piece: held from the decision to fetch a piece until
    /// its fetch ended.
    private(set) var running: [Int: SegmentSlot] = [:]
    private(set) var mainRunning = true
    private(set) var stopping = false
    /// Whether more connections pay, and the probe's piece while it measures.
    private var probe: ConnectionProbe
    private var probeIndex: Int?
    let connections: Int

    init(pieces: PieceBook, connections: Int, probe: ConnectionProbe) {
        self.pieces = pieces
        self.connections = max(1, connections)
        // One connection has nothing to probe (a probe would open a second).
        self.probe = connections > 1 ? probe : ConnectionProbe(window: 0)
    }

    /// Connections open now.
    var active: Int { (mainRunning ? 1 : 0) + running.count }

    /// Nothing runs any more (the prefix's transfer and every fetch ended).
    var idle: Bool { !mainRunning && running.isEmpty }

    /// Everything stops: no piece is taken or asked for again from now on.
    mutating func stop() {
        stopping = true
    }

    /// The place of piece `index`, held (a new one unless the decision to fetch it took one).
    mutating func hold(_ index: Int) -> SegmentSlot {
        let slot = running[index] ?? SegmentSlot()
        running[index] = slot
        return slot
    }

    /// The fetch of piece `index` ended (or never started).
    mutating func release(_ index: Int) {
        running[index] = nil
    }

    /// Pieces for as many more connections as the probe allows now, taken.
    mutating func open() -> [Int] {
        var indices: [Int] = []
        while active < probe.allowed(granted: connections), let index = claimFirst() { indices.append(index) }
        return indices
    }

    /// The probe's decision not yet told (taken once by `takeVerdict`).
    private var untoldVerdict: ConnectionProbe.Verdict?

    /// The probe's newest decision and the connections it leaves the download, once.
    mutating func takeVerdict() -> (verdict: ConnectionProbe.Verdict, connections: Int)? {
        defer { untoldVerdict = nil }
        return untoldVerdict.map { ($0, $0.split ? connections : 1) }
    }

    /// Tells the probe the bytes written by `now`; the pieces to launch that it asks for.
    mutating func probeStep(_ now: Double) -> [Int] {
        let decided = probe.decisions
        let step = probe.observe(written: pieces.written, at: now, remaining: pieces.total - pieces.written)
        if probe.decisions != decided { untoldVerdict = probe.verdict }
        switch step {
        case .none:
            return []
        case .openProbe:
            probeIndex = claimLast()
            return probeIndex.map { [$0] } ?? []
        case .openAll:
            return open()
        }
    }

    /// A fetch of piece `index` wrote `count` bytes up to `next` at `now`; the pieces to launch.
    mutating func fetchWrote(_ index: Int, count: Int64, next: Int64, at now: Double) -> [Int] {
        pieces.advance(index, to: next)
        if index == probeIndex { probe.probeBegan(written: pieces.written - count, at: now) }
        return probeStep(now)
    }

    /// The prefix's transfer ended (`cut`: without reaching its end); the pieces to launch, or why
    /// everything stops.
    mutating func mainEnded(cut: TransferFailure?) -> (launches: [Int], stop: TransferFailure?) {
        mainRunning = false
        if let cut, !pieces.segments[0].isComplete {
            guard !stopping && Self.isTransient(cut.kind) && pieces.retry(0, limit: Self.retriesPerSegment) else {
                return ([], cut)
            }
            running[0] = SegmentSlot()
            return ([0], nil)  // A fetch takes the prefix over.
        }
        guard active < probe.allowed(granted: connections), let next = claimFirst() else { return ([], nil) }
        return ([next], nil)  // The prefix's connection is free: the next piece.
    }

    /// The fetch of piece `index` ended with `result`: the piece to launch next on its connection
    /// (the same one again after a transient cut, the next one nobody has, or the probe's next from
    /// the end), or why everything stops.
    mutating func fetchEnded(_ index: Int, _ result: Result<TransferSummary, TransferFailure>) -> (again: Int?, stop: TransferFailure?) {
        running[index] = nil
        var cut: TransferFailure?
        switch result {
        case .success where pieces.segments[index].isComplete: break
        case .success(let summary) where summary.bodyBytes > 0:
            // An answer ended short of the piece's end (its range was capped) after bytes came:
            // asking again from there goes on (each time by a byte at least), and is no retry.
            guard !stopping else { return (nil, nil) }
            running[index] = SegmentSlot()
            return (index, nil)
        case .success: cut = TransferFailure(.connection, "a segment ended early")
        case .failure(let failure): cut = failure
        }
        guard !stopping else { return (nil, nil) }
        guard let cut else {
            if index == probeIndex && probe.measuring {
                probeIndex = claimLast()  // The probe measures on, from the end of the file.
                return (probeIndex, nil)
            }
            guard active < probe.allowed(granted: connections) else { return (nil, nil) }
            return (claimFirst(), nil)  // This connection takes the next piece nobody has.
        }
        guard Self.isTransient(cut.kind) && pieces.retry(index, limit: Self.retriesPerSegment) else { return (nil, cut) }
        running[index] = SegmentSlot()
        return (index, nil)
    }

    /// The first piece nobody has, now taken and its place in `running` held (nil when none is
    /// left or everything stops).
    private mutating func claimFirst() -> Int? {
        guard !stopping, let index = pieces.claimFirst() else { return nil }
        running[index] = SegmentSlot()
        return index
    }

    /// The last piece nobody has, now taken (the probe's).
    private mutating func claimLast() -> Int? {
        guard !stopping, let index = pieces.claimLast() else { return nil }
        running[index] = SegmentSlot()
        return index
    }

    private static func isTransient(_ kind: TransferFailure.Kind) -> Bool {
        if case .retry = RetryPolicy.classify(kind) { return true }
        return false
    }
}
