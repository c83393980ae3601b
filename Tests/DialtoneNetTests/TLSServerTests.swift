import DialtoneNet
import DialtoneTestSupport
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// TLS on the server's raw sockets (lws adopts them with LWS_ADOPT_ALLOW_SSL and decrypts; the
/// HTTP and WebSocket protocols on top are DialtoneNet's own).
@Suite(.serialized) struct TLSServerTests {
  /// A self-signed certificate for 127.0.0.1, written by the openssl tool.
  private static func certificate() throws -> TLSFiles {
    let directory = NSTemporaryDirectory() + "dialtone-net-tls-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let files = TLSFiles(certificateChain: directory + "/cert.pem", privateKey: directory + "/key.pem")
    let openssl = Process()
    openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    openssl.arguments = [
      "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
      "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", files.privateKey,
      "-out", files.certificateChain,
    ]
    openssl.standardError = FileHandle.nullDevice
    try openssl.run()
    openssl.waitUntilExit()
    try #require(openssl.terminationStatus == 0)
    return files
  }

  private static func tlsServer(_ handler: EchoHandler) throws -> WebServer {
    var configuration = WebServerConfiguration(port: 0)
    configuration.tls = try certificate()
    return try WebServer(configuration: configuration, router: makeRouter(), webSocketHandler: handler)
  }

  @Test func wssEchoesAndCarriesTheServersClose() async throws {
    let handler = EchoHandler()
    let server = try Self.tlsServer(handler)
    let client = try WebSocketClient()
    let probe = try ClientProbe(client: client, url: "wss://127.0.0.1:\(server.port)/v1/ws", allowSelfSigned: true)
    #expect(try await probe.next("open") == .opened)
    probe.connection.send(text: "over tls")
    #expect(try await probe.nextText() == "over tls")
    let large = String(repeating: "z", count: 60_000)
    probe.connection.send(text: large)
    #expect(try await probe.nextText() == large)
    probe.connection.send(text: "close-me")
    #expect(try await probe.next("close") == .closed(code: 4409))
    await client.shutdown()
    await server.stop()
  }

  @Test func httpsAnswersAndPlainHTTPDoesNot() async throws {
    let server = try Self.tlsServer(EchoHandler())
    let port = server.port
    let curl = Process()
    curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
    curl.arguments = [
      "-sk", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code} %{http_version}",
      "https://127.0.0.1:\(port)/healthz",
    ]
    let output = Pipe()
    curl.standardOutput = output
    try curl.run()
    let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    curl.waitUntilExit()
    // HTTP/1.1 even though curl offers h2: the server's ALPN names only http/1.1.
    #expect(printed == "200 1.1")

    let plain = try await blockingIO {
      let connection = try RawHTTPConnection(port: port)
      connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
      return connection.readResponse()
    }
    #expect(plain == nil, "plain HTTP on the TLS port must not be answered")
    await server.stop()
  }
}
