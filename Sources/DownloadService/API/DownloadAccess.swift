/// Who may read a download (its snapshot, progress stream and file). Pure. A credentialed download
/// is private to its callers: only a request showing one of its live caller tokens reads it
/// (header `X-Caller-Token`, or `?token=` where a client cannot set headers), or the operator;
/// anyone else gets the `404` of an unknown download. Public downloads are read by anyone (behind
/// `--auth-token` when that is set).
struct DownloadAccess: Equatable {
    /// The download was made with caller headers.
    var isPrivate: Bool
    /// The request shows a live caller token of this download.
    var showsCallerToken: Bool
    /// The request is the operator's (the operator API's admin token); false without one.
    var isOperator: Bool

    var allowsReading: Bool { !isPrivate || showsCallerToken || isOperator }

    /// Listed in `GET /downloads`: private downloads only for the operator.
    var allowsListing: Bool { !isPrivate || isOperator }

    /// The header a caller shows its token in, and the query parameter that stands in for it.
    static let tokenHeader = "X-Caller-Token"
    static let tokenParameter = "token"
}
