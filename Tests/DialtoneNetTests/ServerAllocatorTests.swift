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
      let maps = (try? String(contentsOfFile: "/proc/\(server.pid)/maps", encoding: .utf8)) ?? ""
      return (maps, server.log)
    }
    #expect(maps.contains("libjemalloc"), "libjemalloc is not mapped into the server")
    #expect(log.contains("allocator: jemalloc 5."), "the start-up log names no jemalloc version: \(log)")
  }
}
