import DialtonePostgres
import DialtoneTestSupport
import Foundation
import Testing

/// PostgreSQL over TLS with the server's certificate checked (`sslmode=verify-full`), as a managed
/// database or one across a network is reached: the URL's TLS parameters reach libpq unchanged.
@Suite struct PostgresTLSTests {
  /// A CA and a server certificate for 127.0.0.1 signed by it, and a second CA that signed nothing.
  private struct Certificates {
    let directory: String
    var ca: String { directory + "/ca.crt" }
    var otherCA: String { directory + "/other-ca.crt" }
    var server: String { directory + "/server.crt" }
    var serverKey: String { directory + "/server.key" }

    init() throws {
      directory = NSTemporaryDirectory() + "dtpgtls-\(UUID().uuidString.prefix(8).lowercased())"
      try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
      for name in ["ca", "other-ca"] {
        try openssl([
          "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
          "-subj", "/CN=dialtone test \(name)", "-keyout", "\(directory)/\(name).key", "-out",
          "\(directory)/\(name).crt",
        ])
      }
      try "subjectAltName=IP:127.0.0.1\n".write(toFile: directory + "/san.ext", atomically: true, encoding: .utf8)
      try openssl([
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=127.0.0.1",
        "-keyout", "\(directory)/server.key", "-out", "\(directory)/server.csr",
      ])
      try openssl([
        "x509", "-req", "-in", "\(directory)/server.csr", "-CA", "\(directory)/ca.crt", "-CAkey",
        "\(directory)/ca.key", "-CAcreateserial", "-days", "2", "-extfile", "\(directory)/san.ext", "-out",
        "\(directory)/server.crt",
      ])
    }

    private func openssl(_ arguments: [String]) throws {
      let process = Process()
      process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
      process.arguments = arguments
      process.standardOutput = FileHandle.nullDevice
      process.standardError = FileHandle.nullDevice
      try process.run()
      process.waitUntilExit()
      guard process.terminationStatus == 0 else {
        throw ScratchProcess.Failure("openssl \(arguments.first ?? "") exited \(process.terminationStatus)")
      }
    }
  }

  @Test func verifyFullConnectsToTheRightServerAndRefusesAnUnknownCA() async throws {
    let certificates = try Certificates()
    defer { try? FileManager.default.removeItem(atPath: certificates.directory) }
    try await ScratchPostgres.with { server in
      try await server.enableTLS(certificate: certificates.server, key: certificates.serverKey)
      let verified = try PostgresConnection(
        url: server.url() + "?sslmode=verify-full&sslrootcert=\(certificates.ca)")
      defer { verified.close() }
      let row = try verified.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").first
      #expect(try row?.bool(0) == true)

      #expect(throws: PostgresError.self) {
        try PostgresConnection(url: server.url() + "?sslmode=verify-full&sslrootcert=\(certificates.otherCA)")
      }
    }
  }
}
