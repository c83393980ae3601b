import DialtoneFuzzTargets
import FuzzDriver

@_cdecl("LLVMFuzzerTestOneInput")
public func httpHeadTestOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  FuzzTargets.httpHead(data, size)
  return 0
}

/// The executable's entry point (see FuzzDriver.h).
@_cdecl("FuzzHTTPHead_main")
public func httpHeadMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
  dialtone_fuzz_run(argc, argv) { data, size in
    guard let data else { return 0 }
    return httpHeadTestOneInput(data, size)
  }
}
