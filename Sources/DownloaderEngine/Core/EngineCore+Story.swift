import Foundation

/// What a download's story needs beyond its record: the current run's counts and times, and the
/// last attempt's trouble and the pause's reason until they are told. Under the engine's lock.
struct StoryLedger {
    /// When the current run began (created, asked again after failing or after a restart,
    /// recovered; monotonic); nil: no run in this process yet.
    var since: Double?
    /// Bytes kept when the run began (a recovered partial).
    var keptAtStart: Int64 = 0
    /// Attempts that asked the origin in this run.
    var attempts = 0
    /// Body bytes received in this run, and seconds spent receiving them.
    var received: Int64 = 0
    var receiving: Double = 0
    /// When the current attempt's body began (monotonic), while it runs.
    var bodySince: Double?
    /// Why the last attempt ended without the file.
    var trouble: DownloadStory.AttemptTrouble?
    var pauseReason = DownloadStory.PauseReason.callerCancelled
    /// Why it was paused before the operator held it: why it stays paused once the hold is lifted
    /// with no caller left (unless a caller left meanwhile, which says so itself).
    var reasonBeforeHold = DownloadStory.PauseReason.callerCancelled

    /// A new run, from `now`, keeping `kept` bytes.
    init(since now: Double? = nil, kept: Int64 = 0) {
        since = now
        keptAtStart = kept
    }
}

// The story of each download (`DownloadStory`): every step is decided under `lock` and told to the
// configuration's storyteller as an effect, so in decision order and never under the lock.
extension EngineCore {
    func tell(_ event: DownloadStory.Event, id: String, url: String) {
        guard let storyteller = configuration.storyteller else { return }
        let story = DownloadStory(id: id, url: url, event: event)
        effects.append { storyteller(story) }
    }

    func tell(_ event: DownloadStory.Event, of record: DownloadRecord) {
        tell(event, id: record.id, url: record.shownURL)
    }

    /// A segmented attempt's probe decided how many connections the download uses (crew's thread).
    func connectionsDecided(_ attempt: Attempt, _ verdict: ConnectionProbe.Verdict, connections: Int) {
        decide {
            guard let record = record(of: attempt) else { return }
            tell(.connectionsDecided(attempt: record.story.attempts, connections: connections,
                                     aloneBytesPerSecond: verdict.alone, probedBytesPerSecond: verdict.probed), of: record)
        }
    }

    func tellCreated(_ record: DownloadRecord, _ request: DownloadRequest, as joiner: Joiner) {
        record.story = StoryLedger(since: clock.monotonic())
        tell(.created(storage: record.storage, client: request.client, by: joiner.asker), of: record)
    }

    /// Before `joiner` joins `record` (and its lifecycle hears of it): joined (coalesced) or resumed.
    func tellJoining(_ record: DownloadRecord, _ request: DownloadRequest, as joiner: Joiner) {
        let before = record.state
        switch before {
        case .paused where record.lifecycle.held:  // The operator's hold: joining resumes nothing.
            tell(.joined(client: request.client, by: joiner.asker, state: before, callers: record.interest + 1), of: record)
        case .paused, .failed:
            if before == .failed || record.story.since == nil {
                record.story = StoryLedger(since: clock.monotonic(), kept: record.keptBytes)
            }
            let offset = record.validator != nil ? record.keptBytes : 0
            tell(.resumed(client: request.client, by: joiner.asker, from: before, offset: offset), of: record)
        case .queued, .downloading, .completed:
            tell(.joined(client: request.client, by: joiner.asker, state: before, callers: record.interest + 1), of: record)
        }
    }

    func tellAttemptStarted(_ record: DownloadRecord, _ attempt: Attempt) {
        record.story.attempts += 1
        let headers = attempt.plan.headers
        tell(.attemptStarted(attempt: record.story.attempts, offset: attempt.plan.offset,
                             range: headers.first { $0.name == "Range" }?.value,
                             ifRange: headers.first { $0.name == "If-Range" }?.value), of: record)
    }

    /// After the lifecycle decided on `head`: `refused` is what the transfer was told, if anything.
    func tellHead(_ record: DownloadRecord, _ attempt: Attempt, _ head: ResponseHead, _ judgement: HeadJudgement,
                  refused: TransferFailure?) {
        var size: Int64?
        let outcome: DownloadStory.HeadOutcome
        if let offset = attempt.acceptedOffset, refused == nil {
            if case .accept(_, let total) = judgement { size = total }
            outcome = .body(offset: offset, restarted: attempt.restarts(at: offset))
            record.story.bodySince = clock.monotonic()
        } else {
            outcome = .refused(refused?.message ?? "not taken")
        }
        tell(.headReceived(attempt: record.story.attempts, status: head.status, size: size,
                           validator: StoryFacts.validatorKind(of: head), outcome: outcome), of: record)
    }

    /// Before the lifecycle takes an attempt's verdict: the receiving time ends, the trouble is kept.
    func noteAttemptEnded(_ record: DownloadRecord, _ attempt: Attempt, _ verdict: AttemptVerdict,
                          _ result: Result<TransferSummary, TransferFailure>) {
        if let began = record.story.bodySince {
            record.story.receiving += max(0, clock.monotonic() - began)
            record.story.bodySince = nil
        }
        record.story.trouble = StoryFacts.trouble(verdict, refusal: attempt.refusal, result: result)
    }

    func tellRetry(_ record: DownloadRecord, delay: Double) {
        let trouble = record.story.trouble ?? DownloadStory.AttemptTrouble(cause: "unknown", message: "unusable answer")
        let offset = record.validator != nil ? record.keptBytes : 0
        tell(.retryScheduled(attempt: record.story.attempts, trouble: trouble, delay: delay, offset: offset), of: record)
    }

    /// The lifecycle told its subscribers `notice`: the story tells the ends of runs.
    func tellNotice(_ notice: LifecycleNotice, of record: DownloadRecord) {
        let story = record.story
        switch notice {
        case .resumed, .queued:
            break  // Told with the head (`tellHead`), with the join or the operator's resume.
        case .paused:
            tell(.paused(reason: story.pauseReason, keptBytes: record.keptBytes), of: record)
        case .completed:
            let size = record.size ?? 0
            let rate = story.receiving > 0 ? Double(story.received) / story.receiving : 0
            tell(.completed(size: size, sha256: record.sha256 ?? "", seconds: max(0, clock.monotonic() - (story.since ?? clock.monotonic())),
                            bytesPerSecond: rate, attempts: story.attempts,
                            refetchedBytes: max(0, story.received - (size - story.keptAtStart))), of: record)
        case .failed:
            let error = record.error ?? DownloadFailure(code: .unknown, message: "failed")
            tell(.failed(code: error.code, message: error.message, httpStatus: error.httpStatus, attempts: story.attempts),
                 of: record)
        }
    }

    /// A download loaded as running at start-up, once its lifecycle decided.
    func tellRecovered(_ record: DownloadRecord) {
        record.story = StoryLedger(since: clock.monotonic(), kept: record.keptBytes)
        tell(.recovered(state: record.state, keptBytes: record.keptBytes, callers: record.tokens.count), of: record)
    }
}

extension EngineCore.Joiner {
    var asker: DownloadStory.Asker {
        switch self {
        case .caller: .caller
        case .reader: .reader
        }
    }
}

/// The pure readings behind story events.
enum StoryFacts {
    static func validatorKind(of head: ResponseHead) -> DownloadStory.ValidatorKind {
        if let validator = ResumePlan.validator(of: head) { return validator.etag != nil ? .etag : .lastModified }
        return head.value("etag")?.trimmingCharacters(in: .whitespaces).hasPrefix("W/") == true ? .weakETag : .none
    }

    /// Why an attempt ended without the file (nil: it did not, or its end is final anyway).
    static func trouble(_ verdict: AttemptVerdict, refusal: HeadJudgement.Refusal?,
                        result: Result<TransferSummary, TransferFailure>) -> DownloadStory.AttemptTrouble? {
        guard case .ended(let end) = verdict else { return nil }
        switch refusal {
        case .restart(let reason)?:
            return .init(cause: "restart", message: reason)
        case .httpRetry(let status, _)?, .httpFail(let status)?:
            return .init(cause: "http_status", message: "HTTP \(status)", httpStatus: status)
        case .fail(let failure, _)?:
            return .init(cause: failure.code.rawValue, message: failure.message, httpStatus: failure.httpStatus)
        case nil:
            break
        }
        if case .failure(let failure) = result {
            return .init(cause: snakeCase(String(describing: failure.kind)), message: failure.message, httpStatus: end.httpStatus)
        }
        return .init(cause: "incomplete", message: "the body ended before the size the origin announced")
    }

    /// `connectTimeout` → `connect_timeout`.
    static func snakeCase(_ name: String) -> String {
        var out = ""
        for character in name {
            if character.isUppercase {
                out += "_" + character.lowercased()
            } else {
                out.append(character)
            }
        }
        return out
    }
}
