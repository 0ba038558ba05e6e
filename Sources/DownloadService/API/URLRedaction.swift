/// Hides credentials a URL may carry (with `--allow-url-credentials`) before it is shown to any
/// caller: `https://user:secret@host/x` becomes `https://***@host/x`. Pure; a URL without `@`
/// costs one scan (it runs for every snapshot answered).
enum URLRedaction {
    static func redactingCredentials(_ url: String) -> String {
        guard url.utf8.contains(UInt8(ascii: "@")), let schemeEnd = url.firstRange(of: "://") else { return url }
        let authorityStart = schemeEnd.upperBound
        let authorityEnd = url[authorityStart...].firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? url.endIndex
        guard let at = url[authorityStart..<authorityEnd].lastIndex(of: "@") else { return url }
        return String(url[..<authorityStart]) + "***" + String(url[at...])
    }
}
