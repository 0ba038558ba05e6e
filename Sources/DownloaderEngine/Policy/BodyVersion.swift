import Foundation

/// Whether an accepted body begins a new version of a download's file (a new generation, which ends
/// every `/fetch` reader of the old one and names a new `ETag`), or goes on with the version its
/// readers were promised. Pure: the facts of the head and of the attempt in, the verdict out.
enum BodyVersion {
    /// `offset`: where the accepted body starts; `keptAtStart`: the bytes the attempt kept when it
    /// started; `generation`: the download's current one (0: no body accepted yet); `current`: the
    /// strong validator of that generation; `offered`: the new head's strong validator.
    ///
    /// A ranged body continues the file. A full body is a new version, except when nothing of the
    /// file was kept (so no reader has read a byte of it) and the head names the same strong
    /// validator as the version readers were promised: then the bytes to come are that version's
    /// (RFC 9110 §8.8.1), and its readers go on (e.g. a reader that joined while the first attempt's
    /// head was all that arrived, before the download paused with nothing written).
    static func isNew(offset: Int64, keptAtStart: Int64, generation: UInt64, current: Validator?, offered: Validator?) -> Bool {
        if generation == 0 { return true }
        guard offset == 0 else { return false }
        guard keptAtStart == 0, let offered, offered == current else { return true }
        return false
    }
}
