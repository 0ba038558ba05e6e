/// Who may use which route: the caller token (`--auth-token`) guards the API, the admin token
/// (`--admin-token`) guards `/admin/*`. Without an admin token `/admin/*` follows the caller token;
/// with neither everything is open. The admin token is accepted wherever the caller token is.
/// Pure but for the constant-time comparisons (`BearerAuth`); `AccessPolicyTests` is its table.
struct AccessPolicy: Sendable {
    enum Verdict: Equatable {
        case allowed
        /// No credentials presented: `401` with `WWW-Authenticate`.
        case missing
        /// Credentials presented, but not the right ones: `403 forbidden`.
        case wrong
    }

    let caller: BearerAuth?
    let admin: BearerAuth?

    init(caller: BearerAuth?, admin: BearerAuth?) {
        self.caller = caller
        self.admin = admin
    }

    init(authToken: String?, adminToken: String?) {
        self.init(caller: authToken.map(BearerAuth.init(token:)), admin: adminToken.map(BearerAuth.init(token:)))
    }

    /// Caller routes: open without a caller token; else the caller or the admin token.
    func callerAccess(authorization header: String?) -> Verdict {
        guard let caller else { return .allowed }
        if caller.allows(authorization: header) { return .allowed }
        if let admin, admin.allows(authorization: header) { return .allowed }
        return Self.isBlank(header) ? .missing : .wrong
    }

    /// `/admin/*`: the admin token, else (none set) the caller token, else open.
    func adminAccess(authorization header: String?) -> Verdict {
        guard let required = admin ?? caller else { return .allowed }
        if required.allows(authorization: header) { return .allowed }
        return Self.isBlank(header) ? .missing : .wrong
    }

    private static func isBlank(_ header: String?) -> Bool {
        header.map { $0.allSatisfy(\.isWhitespace) } ?? true
    }
}

extension DownloadAPI {
    var access: AccessPolicy { AccessPolicy(caller: auth, admin: adminAuth) }
}
