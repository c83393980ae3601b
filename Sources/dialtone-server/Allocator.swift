import CJemalloc

/// The server's memory allocator: jemalloc, linked into this executable only (docs/benchmarks.md,
/// "The allocator"). Linking it is what puts it in use; asking it for its version at start makes
/// the log say which allocator runs, and fails the link if jemalloc is ever dropped.
enum ServerAllocator {
  /// "jemalloc 5.3.0-…", or nil if mallctl does not answer.
  static var description: String? {
    var version: UnsafePointer<CChar>? = nil
    var size = MemoryLayout<UnsafePointer<CChar>?>.size
    guard mallctl("version", &version, &size, nil, 0) == 0, let version else { return nil }
    return "jemalloc " + String(cString: version)
  }
}
