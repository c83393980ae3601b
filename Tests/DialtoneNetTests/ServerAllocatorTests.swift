import DialtoneTestSupport
import Foundation
import Testing

/// dialtone-server runs on jemalloc (Package.swift's CJemalloc, linked into the server only):
/// mapped into the process and answering mallctl, as the start-up log says.
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
}
