import Basics
import Foundation

/// An open file and the half-open byte range of it to send. (A struct, not a tuple: optional tuples
/// need runtime metadata instantiation on the hot path.)
struct FileRange {
    var fd: Int32
    var start: off_t
    var end: off_t
}

/// Opens and stats a file for a `.file` response and decides status, headers and byte range.
/// open/fstat are fast local calls and run on the loop thread; the body is sent with sendfile.
enum FileServer {
    struct Prepared {
        var status: Int
        var headers: HTTPHeaders
        var framing: ResponseHeadEncoder.Framing
        /// The open file and the half-open byte range to send; the fd is owned by the caller.
        var range: FileRange?
        /// A small in-memory body instead (the rendered 412 or 416 error).
        var body: [UInt8]?
    }

    enum Outcome {
        case success(Prepared)
        /// The file cannot be served: answer the error instead.
        case failure(ServerError)
    }

    /// `renderError` renders the 412 and 416 answers (`ServerConfiguration.errorRenderer`).
    static func prepare(_ file: FileResponse, method: String, requestHeaders: HTTPHeaders,
                        renderError: (ServerError) -> Response) -> Outcome {
        let fd = open(file.path, O_RDONLY | O_CLOEXEC | (file.followsSymlinks ? 0 : O_NOFOLLOW))
        if fd < 0 {
            let err = errno
            if err == ENOENT || err == ENOTDIR || err == EISDIR || err == ELOOP {
                return .failure(ServerError(status: 404, kind: .fileNotFound, reason: "file not found"))
            }
            if err == EACCES { return .failure(ServerError(status: 403, kind: .fileNotReadable, reason: "file not readable")) }
            return .failure(ServerError(status: 500, kind: .fileUnavailable, reason: "cannot open file"))
        }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            return .failure(ServerError(status: 404, kind: .fileNotFound, reason: "file not found"))
        }
        let size = Int64(st.st_size)
        // Wrapping: only an ETag's input, and an mtime past 2262 (a `touch -d`) must not trap.
        let mtimeNanos = Int64(st.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(st.st_mtim.tv_nsec)
        let meta = FileMetadata(size: size, modified: st.st_mtim.tv_sec,
                                etag: file.etag ?? FileMetadata.derivedETag(inode: UInt64(st.st_ino), size: size,
                                                                            modifiedNanoseconds: mtimeNanos),
                                alsoMatches: file.alsoMatches, alsoModified: file.alsoModified.compactMap(HTTPDate.parseStrict))
        var headers = HTTPHeaders()
        let plan = FilePlan.decide(method: method, headers: requestHeaders, file: meta)
        headers["ETag"] = FilePlan.etag(answering: plan, headers: requestHeaders, file: meta)
        headers["Last-Modified"] = HTTPDate.format(meta.modified)
        switch plan {
        case .notModified:
            close(fd)
            return .success(Prepared(status: 304, headers: headers, framing: .none))
        case .preconditionFailed:
            close(fd)
            return .success(errorAnswer(ServerError(status: 412, kind: .preconditionFailed, reason: "the file does not meet the request's precondition"),
                                        headers: headers))
        case .unsatisfiable:
            close(fd)
            headers["Content-Range"] = "bytes */\(size)"
            return .success(errorAnswer(ServerError(status: 416, kind: .rangeNotSatisfiable, reason: "requested range not satisfiable"),
                                        headers: headers))
        case .full:
            headers["Content-Type"] = file.contentType
            if let disposition = file.contentDisposition { headers["Content-Disposition"] = disposition }
            headers["Accept-Ranges"] = "bytes"
            if size == 0 { close(fd) }
            return .success(Prepared(status: 200, headers: headers, framing: .length(size),
                                     range: size > 0 ? FileRange(fd: fd, start: 0, end: off_t(size)) : nil))
        case .partial(let start, let end):
            headers["Content-Type"] = file.contentType
            if let disposition = file.contentDisposition { headers["Content-Disposition"] = disposition }
            headers["Accept-Ranges"] = "bytes"
            headers["Content-Range"] = "bytes \(start)-\(end)/\(size)"
            return .success(Prepared(status: 206, headers: headers, framing: .length(end - start + 1),
                                     range: FileRange(fd: fd, start: off_t(start), end: off_t(end + 1))))
        }

        /// The rendered `error` (412, 416) as an in-memory answer, after the file's `headers`.
        func errorAnswer(_ error: ServerError, headers: HTTPHeaders) -> Prepared {
            let rendered = renderError(error)
            var headers = headers
            for (name, value) in rendered.headers { headers[name] = value }
            var body: [UInt8] = []
            if case .bytes(let b) = rendered.body, !HTTPStatus.forbidsBody(rendered.status) { body = b }
            let framing: ResponseHeadEncoder.Framing = HTTPStatus.forbidsBody(rendered.status) ? .none : .length(Int64(body.count))
            return Prepared(status: rendered.status, headers: headers, framing: framing, body: body)
        }
    }
}
