import Basics
import Foundation

// Moving a completed file between storage areas (cache → data) off the callers' threads.
extension EngineCore {
    /// Under `lock`. When the completed file of `record` does not live in the area of its storage
    /// class, its lifecycle starts a move (`moveFile`). Until the move is done the record stays
    /// `completed` and is served from its current path; then `finalPath` switches (stored) and
    /// only after that is committed is the old name removed, so a crash at any point leaves a
    /// stored path that exists.
    func placeFile(_ record: DownloadRecord) {
        guard let target = placementTarget(record) else { return }
        handle(.placementWanted(inPlace: target.to == target.from), for: record)
    }

    private func placementTarget(_ record: DownloadRecord) -> (from: String, to: String)? {
        guard record.state == .completed, let path = record.finalPath, let name = record.fileName else { return nil }
        return (path, finalPath(id: record.id, fileName: name, storage: record.storage, epoch: record.lease?.epoch))
    }

    /// Under `lock`: the move the lifecycle decided, on the work queue once the lock is released.
    func moveFile(_ record: DownloadRecord) {
        guard let (path, target) = placementTarget(record) else { return }
        let id = record.id
        let before = hooks.beforeMove
        effects.append { [self] in
            workQueue.async { [self] in
                before?()
                var failure: SystemError?
                do throws(SystemError) {
                    try store.place(from: path, to: target)
                } catch {
                    failure = error
                }
                let (obsolete, served, after) = finishMove(id: id, from: path, to: target, failure: failure)
                if let obsolete {
                    let drop: @Sendable () -> Void = {
                        FileStore.remove(obsolete)
                        FileStore.syncDirectory(of: obsolete)
                    }
                    // The new path is committed before the old name goes (a row naming it would
                    // otherwise lose its file in a crash): when that commit failed, the old name
                    // goes after its retry succeeds.
                    if obsolete != path || stateWriter.flush() {
                        drop()
                    } else {
                        stateWriter.whenDurable { [workQueue] in workQueue.async(execute: drop) }
                    }
                }
                after?(id, served)
            }
        }
    }

    /// Applies a finished placement. Returns the path to delete afterwards (the old name once
    /// switched, or the copy when the download changed meanwhile), the path now served, and the
    /// `moved` hook.
    private func finishMove(id: String, from path: String, to target: String, failure: SystemError?)
        -> (obsolete: String?, served: String?, hook: (@Sendable (String, String?) -> Void)?) {
        let placed = failure == nil
        return decide {
            let hook = hooks.moved
            guard let record = byID[id] else { return (placed ? target : nil, nil, hook) }
            handle(.moveEnded, for: record)
            guard record.state == .completed, record.finalPath == path else {
                // Re-downloaded or reset meanwhile: drop the copy unless it is the new file itself.
                return (placed && record.finalPath != target ? target : nil, record.finalPath, hook)
            }
            if let failure {
                // The file stays where it is and is served from there. Its class stays what the
                // caller asked for: a persistent file is never purged, whichever area holds it, and
                // the next start moves it (it is not where its class keeps it).
                tell(.moveFailed(storage: record.storage, error: failure.description), of: record)
                return (nil, path, hook)
            }
            tell(.moved(storage: record.storage, path: target), of: record)
            record.finalPath = target
            save(record)
            // Storage changed again while moving (not possible today: persistent never reverts).
            placeFile(record)
            return (path, target, hook)
        }
    }
}
