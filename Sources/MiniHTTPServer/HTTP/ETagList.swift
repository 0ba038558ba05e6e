/// `If-Match` / `If-None-Match` values: a list of entity tags, or `*` (RFC 9110 §13.1.1–2). Pure.
public enum ETagList {
    /// Whether `header` names any of `etags` (`*` names anything). Weak comparison ignores `W/`;
    /// strong comparison never matches a weak tag.
    public static func matches(_ header: String, etags: [String], weak: Bool) -> Bool {
        let strip: (Substring) -> Substring? = { $0.hasPrefix("W/") ? (weak ? $0.dropFirst(2) : nil) : $0 }
        let ours = etags.compactMap { strip(Substring($0)) }
        for item in header.split(separator: ",") {
            let tag = item.trimmingSpaces()
            if tag == "*" { return true }
            if let tag = strip(Substring(tag)), ours.contains(tag) { return true }
        }
        return false
    }
}
