#if canImport(CJemalloc)
  import CJemalloc
#endif

/// The server's memory allocator, and the one module that talks to it (jemalloc's `mallctl`): on
/// Linux jemalloc, linked into dialtone-server only (docs/benchmarks.md, "The allocator").
/// Linking it is what puts it in use; asking it for its version at start makes the log say which
/// allocator runs, and fails the link if jemalloc is ever dropped from the Linux build.
public enum ServerAllocator {
  /// "jemalloc 5.3.0-…", or what else allocates.
  public static var description: String {
    #if canImport(CJemalloc)
      var version: UnsafePointer<CChar>? = nil
      var size = MemoryLayout<UnsafePointer<CChar>?>.size
      guard mallctl("version", &version, &size, nil, 0) == 0, let version else { return "jemalloc, version unknown" }
      return "jemalloc " + String(cString: version)
    #else
      return "the system's malloc"
    #endif
  }
}
