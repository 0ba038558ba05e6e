import DownloaderEngine
import MiniHTTPServer

// Placeholder entry point; the service issue wires routes, configuration and signals here.
print("download-service: not wired yet")
