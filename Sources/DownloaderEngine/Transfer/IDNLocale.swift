import Glibc

/// libcurl converts internationalised host names with libidn2, which reads them in the calling
/// thread's locale: in the C locale (every process starts in it) a non-ASCII host is "bad/illegal
/// format", so a redirect to `bücher.example` could neither be screened nor fetched.
///
/// The process locale is never changed (`setlocale` is not thread-safe once threads run). Instead
/// a thread that hands URLs to libcurl reads them with a UTF-8 character type of its own
/// (`uselocale`, per thread): the transfer loops for good, other callers for one call.
enum IDNLocale {
    /// C.UTF-8's character type (`newlocale` is thread-safe); nil where the system lacks it, and
    /// then non-ASCII hosts stay unreadable as before.
    private nonisolated(unsafe) static let utf8: locale_t? = newlocale(LC_CTYPE_MASK, "C.UTF-8", nil)

    /// The calling thread, one the engine owns for its lifetime, reads text as UTF-8 from now on.
    static func adoptOnThisThread() {
        if let utf8 { _ = uselocale(utf8) }
    }

    /// `body` runs with the calling thread reading text as UTF-8; the thread's locale is restored after.
    static func reading<T>(_ body: () throws -> T) rethrows -> T {
        guard let utf8, let previous = uselocale(utf8) else { return try body() }
        defer { _ = uselocale(previous) }
        return try body()
    }
}
