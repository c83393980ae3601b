import DialtoneFuzzTargets
import FuzzDriver

@_cdecl("LLVMFuzzerTestOneInput")
public func webSocketFramesTestOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  FuzzTargets.webSocketFrames(data, size)
  return 0
}

/// The executable's entry point (see FuzzDriver.h).
@_cdecl("FuzzWebSocketFrames_main")
public func webSocketFramesMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
  dialtone_fuzz_run(argc, argv) { data, size in
    guard let data else { return 0 }
    return webSocketFramesTestOneInput(data, size)
  }
}
