import DownloaderEngine

/// The webhook lines of `/metrics` (Prometheus text format), appended after the others.
enum WebhookMetrics {
    static func render(_ stats: WebhookStatistics) -> String {
        var out = "# HELP download_service_webhook_deliveries_total Webhook deliveries ended, by outcome (delivered, gave_up, forbidden).\n"
        out += "# TYPE download_service_webhook_deliveries_total counter\n"
        for outcome in WebhookOutcome.allCases {
            out += #"download_service_webhook_deliveries_total{outcome=""# + outcome.rawValue + #""} "# + String(stats.deliveries[outcome] ?? 0) + "\n"
        }
        out += "# HELP download_service_webhook_tries_total Webhook HTTP requests tried, whatever their result.\n"
        out += "# TYPE download_service_webhook_tries_total counter\n"
        out += "download_service_webhook_tries_total \(stats.tries)\n"
        out += "# HELP download_service_webhook_store_errors_total Cluster mode: webhook reads and writes of the cluster database that failed (tried again).\n"
        out += "# TYPE download_service_webhook_store_errors_total counter\n"
        out += "download_service_webhook_store_errors_total \(stats.storeErrors)\n"
        return out
    }
}
