import Glibc

/// libcurl converts internationalised host names with libidn2, which reads them in the process
/// locale's character set: in the C locale (a process starts in it) every non-ASCII host is
/// "bad/illegal format", so a redirect to `bücher.example` could neither be screened nor fetched.
/// The character-type category is made UTF-8 once, before libcurl reads a URL, unless the process
/// already chose a locale of its own.
enum IDNLocale {
    static let prepared: Void = {
        let current = setlocale(LC_CTYPE, nil).map { String(cString: $0) } ?? "C"
        guard current == "C" || current == "POSIX" else { return }
        _ = setlocale(LC_CTYPE, "C.UTF-8")
    }()
}
