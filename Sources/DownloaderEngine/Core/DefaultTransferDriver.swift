import Foundation

/// The transfer layer used by the public initialiser.
/// Until the libcurl driver (`Transfer/`) is merged, every attempt fails as a connection error.
func makeDefaultTransferDriver(_ configuration: EngineConfiguration) -> TransferStarting {
    UnavailableTransferDriver()
}

struct UnavailableTransferDriver: TransferStarting {
    private struct Handle: TransferHandle {
        func cancel() {}
    }

    func start(_ request: TransferRequest, delegate: TransferDelegate) -> TransferHandle {
        DispatchQueue.global().async {
            delegate.transfer(didFinishWith: .failure(TransferFailure(.connection, "no transfer driver linked")))
        }
        return Handle()
    }
}
