// Benchmark harness for MiniHTTPServer, compiled by benchmarks/bench-server with swiftc against the
// release build of the module (not part of the package). Usage: [EVENT_LOOPS=N] harness PORT FILE
//   GET /healthz -> {"status":"ok"}      GET /static1k -> 1 KiB text/plain      GET /file -> FILE via sendfile
import Foundation
import MiniHTTPServer

let arguments = CommandLine.arguments
guard arguments.count == 3, let port = Int(arguments[1]) else {
    FileHandle.standardError.write(Data("usage: harness PORT FILE\n".utf8))
    exit(2)
}
let filePath = arguments[2]
let health = Array(#"{"status":"ok"}"#.utf8)
// The same 1 KiB body as benchmarks/bench-server gives nginx ("0123456789abcdef" x 64).
let static1k = Array(String(repeating: "0123456789abcdef", count: 64).utf8)

var configuration = ServerConfiguration()
configuration.port = port
// EVENT_LOOPS overrides ServerConfiguration.eventLoopCount (default: half the online CPUs, at least 1).
if let loops = ProcessInfo.processInfo.environment["EVENT_LOOPS"].flatMap(Int.init) {
    configuration.eventLoopCount = loops
}
let server = HTTPServer(configuration: configuration) { request in
    switch request.path {
    case "/healthz": return .json(health)
    case "/static1k": return Response(headers: ["Content-Type": "text/plain"], body: .bytes(static1k))
    case "/file": return Response(body: .file(FileResponse(path: filePath)))
    default: return Response(status: 404, headers: ["Content-Type": "text/plain"], body: .bytes(Array("no such route\n".utf8)))
    }
}
_ = try server.start()
print("listening on \(port)")
signal(SIGTERM, SIG_IGN)
let term = DispatchSource.makeSignalSource(signal: SIGTERM, queue: .main)
term.setEventHandler {
    Task {
        await server.shutdown()
        exit(0)
    }
}
term.resume()
dispatchMain()
