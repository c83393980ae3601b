import DialtoneFuzzTargets
import FuzzDriver

@_cdecl("LLVMFuzzerTestOneInput")
public func pushPayloadTestOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  FuzzTargets.pushPayload(data, size)
  return 0
}

/// The executable's entry point (see FuzzDriver.h).
@_cdecl("FuzzPushPayload_main")
public func pushPayloadMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
  dialtone_fuzz_run(argc, argv) { data, size in
    guard let data else { return 0 }
    return pushPayloadTestOneInput(data, size)
  }
}
