import DialtoneHTTPClient
import DialtoneNet
import DialtoneProtocol
import Foundation
import Testing

@testable import DialtoneServer

/// `--tls-cert`/`--tls-key`: https:// and wss:// on the server's one port, checked by real TLS
/// clients (libcurl verifying the certificate, lws's client).
@Suite(.serialized) struct TLSTests {
  /// A self-signed certificate for 127.0.0.1, written by the openssl tool.
  private static func certificate(in directory: String) throws -> (certificate: String, key: String) {
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let certificate = directory + "/cert.pem"
    let key = directory + "/key.pem"
    let openssl = Process()
    openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    openssl.arguments = [
      "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
      "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", certificate,
    ]
    openssl.standardError = FileHandle.nullDevice
    try openssl.run()
    openssl.waitUntilExit()
    #expect(openssl.terminationStatus == 0)
    return (certificate, key)
  }

  @Test func httpsAndWssShareThePort() async throws {
    let directory = NSTemporaryDirectory() + "dialtone-tls-\(UUID().uuidString)"
    let files = try Self.certificate(in: directory)
    let server = try await TestServer {
      $0.tlsCertificateFile = files.certificate
      $0.tlsKeyFile = files.key
    }
    let port = server.server.port
    #expect(server.server.baseURL == "https://127.0.0.1:\(port)")

    let https = HTTPClient(configuration: .init(caFile: files.certificate, http2: false))
    let health = try await https.send(HTTPClientRequest(method: "GET", url: "https://127.0.0.1:\(port)/healthz"))
    #expect(health.status == 200)
    let me = try await https.send(
      HTTPClientRequest(
        method: "GET", url: "https://127.0.0.1:\(port)/v1/me",
        headers: [("Authorization", "Bearer \(server.token("alice"))")]))
    #expect(me.status == 200)
    // A client that does not trust the certificate is refused by its own verification.
    let untrusting = HTTPClient(configuration: .init(http2: false))
    await #expect(throws: HTTPClientError.self) {
      _ = try await untrusting.send(HTTPClientRequest(method: "GET", url: "https://127.0.0.1:\(port)/healthz"))
    }
    https.shutdown()
    untrusting.shutdown()

    let probe = try SignalingProbe(
      client: server.client, url: "wss://127.0.0.1:\(port)/v1/ws", allowSelfSignedCertificates: true)
    let welcome = try await probe.hello(token: server.token("alice"))
    #expect(welcome.userId == "alice")
    #expect(try await probe.request(.ping(.init())).isAck)

    // Plain HTTP on the TLS port gets no answer as HTTP.
    let plain = try? await server.http("GET", "/healthz")
    #expect(plain?.status != 200)
    await server.stop()
    try? FileManager.default.removeItem(atPath: directory)
  }

  @Test func unreadableFilesAreAClearError() async throws {
    await #expect(throws: (any Error).self) {
      _ = try await TestServer {
        $0.tlsCertificateFile = "/nonexistent/cert.pem"
        $0.tlsKeyFile = "/nonexistent/key.pem"
      }
    }
    #expect(throws: ConfigurationError.self) {
      try ServerConfiguration.parse(arguments: ["--tls-cert", "/x.pem"], environment: [:])
    }
  }
}
