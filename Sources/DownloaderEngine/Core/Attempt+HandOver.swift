/// A followed attempt's bytes reach its readers in batches (`HandOverPacing`): on the transfer
/// thread, after each append and whenever the transfer loop looks while no byte comes (`idle`).
extension Attempt {
    /// Transfer thread: hands the held-back bytes to the write lane when they are due. A segmented
    /// attempt (its prefix runs beside the crew) hands over every append, as before.
    func handOverIfDue(_ partial: PartialFile, at now: Double) {
        let held = partial.heldBack
        guard held > 0 else {
            heldSince = nil
            return
        }
        let since = heldSince ?? now
        if prefixEnd != nil || handOverPacing.handOverNow(pending: held, waited: now - since, first: !handedOverAny) {
            partial.handOver()
            handedOverAny = true
            heldSince = nil
        } else {
            heldSince = since
        }
    }

    /// Transfer thread, while no byte arrives: held-back bytes that are due go to the readers now.
    /// Returns the seconds until the next are due (nil: nothing held).
    func idle() -> Double? {
        guard followed.load(ordering: .relaxed), let partial, let core, heldSince != nil else { return nil }
        let now = core.clock.monotonic()
        handOverIfDue(partial, at: now)
        guard let since = heldSince else { return nil }
        return handOverPacing.dueIn(pending: partial.heldBack, waited: now - since)
    }
}
