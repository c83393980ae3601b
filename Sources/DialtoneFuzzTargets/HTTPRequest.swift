import DialtoneNet
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Records nothing: the harness only needs sockets to be accepted and messages to arrive.
private final class SilentHandler: WebSocketHandler, Sendable {
  func webSocketOpened(_ connection: WebSocketConnection, request: UpgradeRequest) {}
  func webSocketReceived(_ connection: WebSocketConnection, message: [UInt8], isText: Bool) {
    connection.send(text: message)
  }
  func webSocketClosed(_ connection: WebSocketConnection, code: UInt16?) {}
}

/// One server for the whole run, on a loopback port, with routes of every kind of body.
private let server: WebServer? = {
  var router = Router()
  router.add(.GET, "/healthz") { _ in .text("ok") }
  router.add(.GET, "/items/{id}") { request in .text(request.pathParameters["id"] ?? "") }
  router.add(.POST, "/echo") { request in HTTPResponse(body: request.body) }
  let configuration = WebServerConfiguration(port: 0, maxBodyBytes: 64 * 1024)
  return try? WebServer(configuration: configuration, router: router, webSocketHandler: SilentHandler())
}()

extension FuzzTargets {
  /// Raw bytes on a fresh connection, as any client on the network could send them (request
  /// lines, headers, bodies, WebSocket upgrades and frames): the server answers or closes, and
  /// never crashes or hangs.
  public static func httpRequest(_ data: UnsafePointer<UInt8>, _ size: Int) {
    guard let port = server?.port else { fatalError("the server did not start") }
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard connected == 0 else { return }
    var sent = 0
    while sent < size {
      let n = send(fd, data + sent, size - sent, Int32(MSG_NOSIGNAL))
      if n <= 0 { break }
      sent += n
    }
    shutdown(fd, Int32(SHUT_WR))
    // Read until the server closes, or a short while: an incomplete request just waits.
    var buffer = [UInt8](repeating: 0, count: 16 * 1024)
    var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    for _ in 0..<64 {
      guard poll(&poller, 1, 20) > 0 else { break }
      if recv(fd, &buffer, buffer.count, 0) <= 0 { break }
    }
    return
  }
}
