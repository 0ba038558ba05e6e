/// An HTTP/1.1 server on epoll. CONTRACT ONLY: the server helper replaces these bodies.
public final class HTTPServer: Sendable {
    public let configuration: ServerConfiguration

    public init(configuration: ServerConfiguration, handler: @escaping HTTPHandler) {
        self.configuration = configuration
    }

    /// Binds, starts the event loop and returns the port actually bound (useful with port 0).
    public func start() throws -> Int {
        fatalError("not implemented yet")
    }

    /// Stops accepting, lets in-flight requests finish within `shutdownGracePeriod`, cancels
    /// streams, closes every connection and stops the loop. Returns when all of that is done.
    public func shutdown() async {
        fatalError("not implemented yet")
    }
}
