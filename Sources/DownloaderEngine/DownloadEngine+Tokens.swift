extension DownloadEngine {
    /// Which of `tokens` are still live caller tokens (not cancelled, dropped at the caller cap,
    /// forgotten with their download, or lost at a restart). One lock for the whole batch.
    public func liveTokens(among tokens: [String]) -> Set<String> {
        let hashed = tokens.map { ($0, TokenHash(token: $0)) }
        return core.locked { Set(hashed.filter { core.tokens[$0.1] != nil }.map(\.0)) }
    }
}
