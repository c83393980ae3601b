#if canImport(CJemalloc)
  import CJemalloc
  import CJemallocSettings
#endif

/// The server's memory allocator, and the one module that talks to it (jemalloc's `mallctl`): on
/// Linux jemalloc, linked into dialtone-server only (docs/benchmarks.md, "The allocator"). Linking it is what puts it in use; asking it for its
/// version at start makes the log say which allocator runs, and fails the link if jemalloc is
/// ever dropped from the Linux build.
public enum ServerAllocator {
  /// "jemalloc 5.3.0-…, malloc_conf "…": opt.… …", or what else allocates: the version, the
  /// settings compiled into the server and what jemalloc reports for each of them, so the log
  /// shows they took (a MALLOC_CONF in the environment overrides them).
  public static var description: String {
    #if canImport(CJemalloc)
      var version: UnsafePointer<CChar>? = nil
      var size = MemoryLayout<UnsafePointer<CChar>?>.size
      guard mallctl("version", &version, &size, nil, 0) == 0, let version else { return "jemalloc, version unknown" }
      let options = settingNames.map { "opt.\($0) \(decayOption($0).map(String.init) ?? "unknown")" }
      return "jemalloc \(String(cString: version)), malloc_conf \"\(settings)\": \(options.joined(separator: ", "))"
    #else
      return "the system's malloc"
    #endif
  }

  #if canImport(CJemalloc)
    /// The settings jemalloc read at its start from the server's binary (CJemallocSettings).
    static var settings: String { String(cString: dialtone_jemalloc_settings()) }

    /// The options those settings name, in their order ("dirty_decay_ms", …).
    static var settingNames: [Substring] {
      settings.split(separator: ",").compactMap { $0.split(separator: ":", maxSplits: 1).first }
    }

    /// A decay time jemalloc runs with (`opt.<name>`, an `ssize_t` of milliseconds; -1 never
    /// purges), or nil where jemalloc has no such option.
    static func decayOption(_ name: Substring) -> Int? {
      var value = 0
      var size = MemoryLayout<Int>.size
      return mallctl("opt.\(name)", &value, &size, nil, 0) == 0 ? value : nil
    }
  #endif
}
