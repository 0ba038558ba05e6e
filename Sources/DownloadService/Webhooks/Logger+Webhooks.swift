import DownloaderEngine

extension Logger {
    /// One line per delivery that ended: delivered (info), gave up or refused (warning). The
    /// callback URL shows as scheme and host only; the body and the secret never appear.
    func webhook(_ report: WebhookReport) {
        var fields: [String: Any] = [
            "deliveryId": report.deliveryID, "download": report.downloadID, "event": report.event.rawValue,
            "callback": report.shownURL, "outcome": report.outcome.rawValue, "tries": report.tries,
        ]
        if let reason = report.reason { fields["reason"] = reason }
        switch report.outcome {
        case .delivered: info("webhook delivered", fields)
        case .gaveUp: warning("webhook delivery gave up", fields)
        case .forbidden: warning("webhook delivery refused: destination forbidden", fields)
        }
    }
}
