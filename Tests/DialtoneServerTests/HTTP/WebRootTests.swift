import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer

@Suite(.serialized) struct WebRootTests {
  @Test func aWebRootReplacesTheBuiltInPagesAndIsReadOnEveryRequest() async throws {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("web-root-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: root) }
    let page = root.appendingPathComponent("softphone.html")
    try Data("<p>first</p>".utf8).write(to: page)

    let server = try await TestServer {
      $0.webRoot = root.path
      $0.adminToken = "admin-token-0123456789"
    }
    #expect(try await server.raw("/").body == "<p>first</p>")
    try Data("<p>second</p>".utf8).write(to: page)
    #expect(try await server.raw("/").body == "<p>second</p>")
    // No admin.html there: the built-in dashboard, still behind its credential.
    #expect(try await server.raw("/admin").status == 401)
    let admin = try await server.raw("/admin", headers: ["Authorization": "Bearer admin-token-0123456789"])
    #expect(admin.status == 200 && admin.body == String(decoding: PackageResources.admin_html, as: UTF8.self))
    await server.stop()
  }

  @Test func aWebRootMustBeADirectory() {
    #expect(throws: ConfigurationError.self) {
      try ServerConfiguration.parse(arguments: ["--web-root", "/nonexistent/dialtone"], environment: [:])
    }
  }
}
