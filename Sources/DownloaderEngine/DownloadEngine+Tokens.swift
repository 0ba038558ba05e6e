extension DownloadEngine {
    /// Which of `tokens` are still live caller tokens (not cancelled, dropped at the caller cap,
    /// forgotten with their download, or lost at a restart). One lock for the whole batch.
    public func liveTokens(among tokens: [String]) -> Set<String> {
        core.locked { Set(tokens.filter { core.tokens[$0] != nil }) }
    }
}
