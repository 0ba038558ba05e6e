/// Hides credentials a URL may carry (with `--allow-url-credentials`) before it is shown to any
/// caller: `https://user:secret@host/x` becomes `https://***@host/x`. Pure.
enum URLRedaction {
    static func redactingCredentials(_ url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return url }
        let authorityStart = schemeEnd.upperBound
        let authorityEnd = url[authorityStart...].firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? url.endIndex
        guard let at = url[authorityStart..<authorityEnd].lastIndex(of: "@") else { return url }
        return String(url[..<authorityStart]) + "***" + String(url[at...])
    }
}
