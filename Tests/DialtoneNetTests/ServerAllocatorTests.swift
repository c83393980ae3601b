import DialtoneTestSupport
import Foundation
import Testing

/// dialtone-server runs on jemalloc (Package.swift's CJemalloc, linked into the server only):
/// mapped into the process and answering mallctl, as the start-up log says, with the settings
/// compiled into the server (CJemallocSettings) in effect.
@Suite struct ServerAllocatorTests {
  @Test func theServerRunsOnJemalloc() async throws {
    let (maps, log) = try await blockingIO { () throws -> (String, String) in
      let server = try ServerProcess()
      defer { server.stop() }
      // Read to the end: String(contentsOfFile:) stops at the first 4 KB of a /proc file.
      let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/\(server.pid)/maps"))
      defer { try? handle.close() }
      let maps = String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self)
      return (maps, server.log)
    }
    #expect(maps.contains("libjemalloc"), "libjemalloc is not mapped into the server")
    #expect(log.contains("allocator: jemalloc 5."), "the start-up log names no jemalloc version: \(log)")
  }

  /// jemalloc took the server's own settings (its defaults are 10000 and 0 ms): mallctl's
  /// `opt.*`, as the log reports them, say pages freed are kept rather than purged.
  @Test func theServersSettingsTookEffect() async throws {
    let log = try await blockingIO { () throws -> String in
      let server = try ServerProcess()
      defer { server.stop() }
      return server.log
    }
    #expect(log.contains("malloc_conf \"dirty_decay_ms:-1,muzzy_decay_ms:-1\""), "\(log)")
    #expect(log.contains("opt.dirty_decay_ms -1, opt.muzzy_decay_ms -1"), "\(log)")
  }
}
