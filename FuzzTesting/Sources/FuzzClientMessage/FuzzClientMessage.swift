import DialtoneFuzzTargets
import FuzzDriver

@_cdecl("LLVMFuzzerTestOneInput")
public func clientMessageTestOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  FuzzTargets.clientMessage(data, size)
  return 0
}

/// The executable's entry point (see FuzzDriver.h).
@_cdecl("FuzzClientMessage_main")
public func clientMessageMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
  dialtone_fuzz_run(argc, argv) { data, size in
    guard let data else { return 0 }
    return clientMessageTestOneInput(data, size)
  }
}
