import Foundation

// Purging under pressure, by age and by the cache budget. Order, always: paused partials (oldest
// first), then least-recently-used cache files. Running downloads and the persistent area are
// never touched. Samples are taken without the lock; purging happens under it.
extension EngineCore {
    /// Samples the monitor (without the lock) and purges what the samples call for. `memory: false`
    /// skips the memory sample (before an attempt only the disk matters).
    func checkPressure(memory checkMemory: Bool = true) {
        let memory = checkMemory && pressure.memoryUnderPressure()
        // Read before the samples: a deletion done between the two is counted twice (this check
        // purges too little, the next one sees), never missed (purging again for freed space).
        let freeing = (partials: freeing.pending(.partials), cache: freeing.pending(.cache))
        let stateSpace = pressure.space(of: store.stateDirectory)
        let cacheSpace = pressure.space(of: store.cacheDirectory)
        decide {
            relievePressure(memory: memory, stateSpace: stateSpace, cacheSpace: cacheSpace, freeing: freeing)
            if checkMemory {
                expireIdle()
                purgeCache()  // Also while nothing completes (partials kept by callers who left pile up).
            }
        }
    }

    /// Under `lock`. Memory pressure, for what memory holds (an area on tmpfs or ramfs): every
    /// paused partial goes (oldest first), then cache files beyond `cacheMaxBytes`; files on a disk
    /// stay (deleting them frees no memory, and the page cache of the service's own writes is enough
    /// to raise a cgroup's `memory.high` events). Low disk: paused partials (when the state area is
    /// low, or shares the low cache area's file system), then least-recently-used cache files (when
    /// the cache area is low), until the free space counted back reaches the minimum. `freeing`:
    /// bytes of each area's files being deleted (`FreeingBytes`), counted as free.
    func relievePressure(memory pressed: Bool, stateSpace: DiskSpace?, cacheSpace: DiskSpace?,
                         freeing: (partials: Int64, cache: Int64) = (0, 0)) {
        let memory = pressed && stateSpace?.inMemory == true
        let cacheMemory = pressed && cacheSpace?.inMemory == true
        let shared = stateSpace != nil && stateSpace?.fileSystem == cacheSpace?.fileSystem
        let stateFreeing = DiskSpace.adding(shared ? freeing.cache : 0, to: freeing.partials)
        let cacheFreeing = DiskSpace.adding(shared ? freeing.partials : 0, to: freeing.cache)
        var stateFree = stateSpace.map { DiskSpace.adding(stateFreeing, to: $0.free) } ?? .max
        var cacheFree = cacheSpace.map { DiskSpace.adding(cacheFreeing, to: $0.free) } ?? .max
        func stateLow() -> Bool { stateSpace.map { diskPressure.isLow(free: stateFree, total: $0.total) } ?? false }
        func cacheLow() -> Bool { cacheSpace.map { diskPressure.isLow(free: cacheFree, total: $0.total) } ?? false }
        guard memory || cacheMemory || stateLow() || cacheLow() else { return }
        for record in idlePartials() {
            let diskWants = stateLow() || (shared && cacheLow())
            guard memory || diskWants else { break }
            let freed = record.partialBytes
            purgePartial(record, reason: memory ? .memory : .disk)
            stateFree = DiskSpace.adding(freed, to: stateFree)
            if shared { cacheFree = DiskSpace.adding(freed, to: cacheFree) }
        }
        if cacheMemory, let limit = configuration.cacheMaxBytes {
            purgeCacheFiles(reason: .memory, countingPartials: memory) { usage in usage > limit }
        }
        if cacheLow() {
            purgeCacheFiles(reason: .disk) { _ in cacheLow() } freed: { bytes in
                cacheFree = DiskSpace.adding(bytes, to: cacheFree)
                if shared { stateFree = DiskSpace.adding(bytes, to: stateFree) }
            }
        }
    }

    /// Under `lock`. Keeps cache usage (paused partials + completed cache files) within
    /// `cacheMaxBytes`: what alone is larger than the whole budget goes first (it can never fit:
    /// making room for it emptied the cache and then purged it anyway), then paused partials
    /// (oldest first), then least-recently-used cache files.
    func purgeCache() {
        guard let limit = configuration.cacheMaxBytes else { return }
        // Summed before anything is sorted: this runs at every completion and tick.
        var usage: Int64 = byID.values.reduce(0) { sum, record in
            sum + (Self.isIdlePartial(record) ? record.partialBytes : 0) + (Self.isCacheFile(record) ? record.size ?? 0 : 0)
        }
        guard usage > limit else { return }
        let idle = idlePartials()
        for record in idle where record.partialBytes > limit {
            usage -= record.partialBytes
            purgePartial(record, reason: .cacheLimit)
        }
        purgeCacheFiles(reason: .cacheLimit, only: { ($0.size ?? 0) > limit }) { _ in usage > limit } freed: { usage -= $0 }
        for record in idle where usage > limit && record.partialBytes > 0 {
            usage -= record.partialBytes
            purgePartial(record, reason: .cacheLimit)
        }
        purgeCacheFiles(reason: .cacheLimit) { _ in usage > limit } freed: { usage -= $0 }
    }

    /// Under `lock`. Paused partials older than `pausedTTL` go with their downloads; paused downloads
    /// that keep no bytes are forgotten after the same time, and beyond `maxEmptyPausedDownloads`.
    /// `restored`: at start-up, the paused downloads just restored, the only ones it can concern
    /// then (no pass over every download).
    func expireIdle(restored: [DownloadRecord]? = nil) {
        let cutoff = ageing.now(clock).addingTimeInterval(-max(0, configuration.pausedTTL))
        // Only the expired ones are sorted (start-up: 10 000 paused, usually none expired).
        let expired: (DownloadRecord) -> Bool = { $0.state == .paused && $0.updatedAt < cutoff && !$0.lifecycle.held }
        // One pass finds the idle partials, for the time-to-live and then the per-client bound.
        let partials = restored?.filter(Self.isIdlePartial) ?? byID.values.filter(Self.isIdlePartial)
        let idle = idlePartials(among: partials, where: expired)
        for record in idle {
            purgePartial(record, reason: .ttl)
            retire(record)
        }
        // At start-up: from the first tick on.
        if restored == nil { boundIdlePartialsPerClient(among: partials.filter { !expired($0) }) }
        let forgotten = Set(idle.map(ObjectIdentifier.init))
        boundEmptyPaused(olderThan: cutoff, among: restored?.filter { !forgotten.contains(ObjectIdentifier($0)) })
    }

    /// Under `lock`. A client's quota counts the tokens of its unfinished downloads; cancelling
    /// frees the place but leaves the partial on disk, paused, for `pausedTTL`. Of those partials no
    /// quota counts (paused ones nobody holds, failed ones), a client keeps at most
    /// `maxIdlePartialsPerClient`; beyond it its oldest are purged (their downloads stay, paused
    /// without bytes, under the bound of those). Other clients' partials are never touched: a
    /// client that cancels its way past its quota purges only its own.
    /// `partials`: the idle partials (`isIdlePartial`) the time-to-live left.
    func boundIdlePartialsPerClient(among partials: [DownloadRecord]) {
        let limit = configuration.maxIdlePartialsPerClient
        guard limit > 0 else { return }
        var left: [String: [DownloadRecord]] = [:]
        for record in partials where !record.lifecycle.held && (record.tokens.isEmpty || record.state == .failed) {
            if let client = record.clientGroup { left[client, default: []].append(record) }
        }
        for records in left.values where records.count > limit {
            let oldest = records.sorted { $0.updatedAt != $1.updatedAt ? $0.updatedAt < $1.updatedAt : $0.id < $1.id }
            for record in oldest.prefix(records.count - limit) { purgePartial(record, reason: .clientLimit) }
        }
    }

    /// Downloads with kept bytes and nothing running: paused, or failed with a partial; oldest first.
    /// Not those with `/fetch` readers (an operator's hold keeps them waiting on the partial they
    /// read from). `also`: only those it holds for.
    private func idlePartials(where also: (DownloadRecord) -> Bool = { _ in true }) -> [DownloadRecord] {
        idlePartials(among: byID.values, where: also)
    }

    private func idlePartials(among records: some Sequence<DownloadRecord>,
                              where also: (DownloadRecord) -> Bool) -> [DownloadRecord] {
        records
            .filter { Self.isIdlePartial($0) && also($0) }
            .sorted { $0.updatedAt != $1.updatedAt ? $0.updatedAt < $1.updatedAt : $0.id < $1.id }
    }

    private static func isIdlePartial(_ record: DownloadRecord) -> Bool {
        record.attempt == nil && record.readers == 0 && (record.state == .paused || record.state == .failed) && record.partialBytes > 0
    }

    private static func isCacheFile(_ record: DownloadRecord) -> Bool {
        record.state == .completed && record.storage == .cache && record.finalPath != nil && !record.lifecycle.moving
    }

    /// Completed downloads in the cache area, least recently used first.
    private func cacheFiles() -> [DownloadRecord] {
        byID.values
            .filter(Self.isCacheFile)
            .sorted { $0.lastAccess != $1.lastAccess ? $0.lastAccess < $1.lastAccess : $0.id < $1.id }
    }

    private func purgePartial(_ record: DownloadRecord, reason: PurgeReason) {
        let bytes = record.partialBytes
        discardPartial(record)
        record.updatedAt = clock.now()
        save(record)
        notePurge(PurgeEvent(kind: .pausedPartial, reason: reason, id: record.id, url: record.shownURL, bytes: bytes))
        publish(.progress(record.snapshot()), of: record)  // Watchers see the kept bytes gone (`/events`, progress streams).
    }

    /// Purges cache files, least recently used first, while `more(usage)` holds (usage: bytes of
    /// paused partials and cache files).
    /// `countingPartials`: paused partials count in the usage `more` weighs (not when they are
    /// on a disk while the cache files are in memory).
    /// `only`: the files it may purge (all by default).
    private func purgeCacheFiles(reason: PurgeReason, countingPartials: Bool = true, only eligible: (DownloadRecord) -> Bool = { _ in true },
                                 while more: (Int64) -> Bool, freed: (Int64) -> Void = { _ in }) {
        let files = cacheFiles()
        var usage = (countingPartials ? idlePartials().reduce(0) { $0 + $1.partialBytes } : 0) + files.reduce(0) { $0 + ($1.size ?? 0) }
        for record in files where eligible(record) {
            guard more(usage) else { break }
            let bytes = record.size ?? 0
            usage -= bytes
            if let path = record.finalPath { removeLater(path, freeing: (bytes, .cache)) }  // Its id (so its name) is never reused.
            retire(record)
            freed(bytes)
            notePurge(PurgeEvent(kind: .cacheFile, reason: reason, id: record.id, url: record.shownURL, bytes: bytes))
        }
    }

    /// Under `lock`: counts the purge and reports it (in order, without the lock).
    func notePurge(_ event: PurgeEvent) {
        stats.purges[PurgeCounterKey(kind: event.kind, reason: event.reason), default: 0] += 1
        tell(.purged(kind: event.kind, reason: event.reason, bytes: event.bytes), id: event.id, url: event.url)
        guard let handler = purgeHandler else { return }
        notifyQueue.async { handler(event) }
    }
}

extension DownloadRecord {
    /// What its partial holds on disk: the contiguous prefix, or for a segmented download every
    /// segment's bytes (those beyond the prefix are on disk too).
    var partialBytes: Int64 { max(keptBytes, segments?.writtenBytes ?? 0) }
}
