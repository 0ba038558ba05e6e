import Foundation

/// Keeps a single process off a cluster's shared areas. Every replica marks the areas it shares
/// (`<shared-dir>/cache`, `persistent`, `partial`) with a file of this name at start; a single
/// process refuses to start when one of its areas (`--cache-dir`, `--data-dir`, `--state-dir`) holds
/// it. Started there by mistake, it would sweep at start-up every file its own records do not name:
/// the replicas' partials and completed files. The mark stays when the replicas stop (they may be
/// down only for a while); an operator who means to run a single process there removes it.
enum SharedAreaMarker {
    static let fileName = ".download-service-cluster"
    static let contents = "These are a download-service cluster's shared areas (--shared-dir): a single process refuses to start on them.\n"

    /// Cluster mode: marks `areas` (created when missing).
    static func mark(_ areas: [URL]) throws {
        for area in areas {
            try FileManager.default.createDirectory(at: area, withIntermediateDirectories: true)
            let path = area.appendingPathComponent(fileName).path
            if !FileManager.default.fileExists(atPath: path) {
                try contents.write(toFile: path, atomically: true, encoding: .utf8)
            }
        }
    }

    /// Single process: throws when one of `areas` (named as the options that set them) is marked.
    static func refuseMarked(_ areas: [(option: String, directory: URL)]) throws {
        for (option, area) in areas where FileManager.default.fileExists(atPath: area.appendingPathComponent(fileName).path) {
            throw ServiceStartError(message: "\(option) \(area.path) is a cluster's shared area (it holds \(fileName)): a single process "
                                    + "started there would sweep the replicas' files; start it with --cluster-db and --shared-dir, "
                                    + "or give it areas of its own (remove \(fileName) only if no cluster uses the directory any more)")
        }
    }
}
