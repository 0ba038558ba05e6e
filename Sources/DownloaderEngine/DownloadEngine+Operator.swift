extension DownloadEngine {
    /// The operator's pause: stops the transfer whatever the callers want (their tokens stay
    /// valid; their subscriptions see `paused` with `pausedBy == .operator`). Callers joining leave
    /// it paused until `operatorResume`. Stored before it returns (survives restarts and
    /// crashes). Idempotent; `invalidState` for a completed or failed download. `unknown` also when
    /// the hold could not be stored (`operatorPausing` throws `stateUnavailable` then).
    public func operatorPause(id: String) -> OperatorOutcome {
        (try? operatorPausing(id: id)) ?? .unknown
    }

    /// Lifts the operator's hold: the transfer runs again if at least one caller or reader
    /// remains, else the download stays paused. Idempotent; `invalidState` for a completed or failed
    /// download. `unknown` also when the change could not be stored (`operatorResuming` says so).
    public func operatorResume(id: String) -> OperatorOutcome {
        (try? operatorResuming(id: id)) ?? .unknown
    }

    /// Removes download `id`: stops any transfer, deletes its partial or stored file (a file being
    /// served finishes serving: the open descriptor keeps it), ends every subscription with
    /// `removed`, aborts readers following its bytes, invalidates its tokens, and leaves a durable
    /// tombstone (committed before this returns) so it never comes back; a later request of the
    /// URL starts afresh under a new id. Returns its last snapshot, or nil for an unknown id (and
    /// when the tombstone could not be stored: `removing` throws `stateUnavailable` then).
    public func remove(id: String) -> DownloadSnapshot? {
        (try? removing(id: id)) ?? nil
    }
}
