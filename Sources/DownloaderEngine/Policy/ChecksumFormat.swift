/// Validates caller-supplied SHA-256 digests.
enum ChecksumFormat {
    /// The digest lower-cased when it is exactly 64 hex digits, else nil.
    static func normalizedSHA256(_ value: String) -> String? {
        let lower = value.lowercased()
        guard lower.utf8.count == 64, lower.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else {
            return nil
        }
        return lower
    }
}
