import DialtonePostgres
import DialtoneTestSupport
import Foundation
import Testing

/// PostgreSQL over TLS with the server's certificate checked (`sslmode=verify-full`), as a managed
/// database or one across a network is reached: the URL's TLS parameters reach libpq unchanged.
@Suite struct PostgresTLSTests {
  @Test func verifyFullConnectsToTheRightServerAndRefusesAnUnknownCA() async throws {
    let certificates = try ScratchCertificates()
    defer { certificates.remove() }
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
