import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// The server's listening socket, owned here rather than by lws: lws 4.1 resolves a listen
/// interface through getifaddrs and closes one netlink descriptor twice, which can close another
/// thread's socket. Accepted sockets are handed to the network thread, which adopts them into lws.
final class Listener: @unchecked Sendable {
  // @unchecked: `fd` is immutable; the accept source runs on its own serial queue.
  let port: Int
  private let fd: Int32
  private let source: DispatchSourceRead
  private let queue = DispatchQueue(label: "dialtone.listener")

  init(host: String, port: Int, accepted: @escaping @Sendable ([Int32]) -> Void) throws(NetError) {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(clamping: port).bigEndian)
    let literal = host == "localhost" ? "127.0.0.1" : host
    guard literal.withCString({ inet_pton(AF_INET, $0, &address.sin_addr) }) == 1 else {
      throw .listenFailed("--host must be an IPv4 address (like 127.0.0.1 or 0.0.0.0), got \"\(host)\"")
    }
    let fd = socket(
      AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw .listenFailed("socket(): \(String(cString: strerror(errno)))") }
    var one: Int32 = 1
    _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, length) == 0 && listen(fd, 4096) == 0 && getsockname(fd, $0, &length) == 0
      }
    }
    guard ok else {
      let reason = String(cString: strerror(errno))
      close(fd)
      throw .listenFailed("cannot listen on \(host):\(port): \(reason)")
    }
    self.fd = fd
    self.port = Int(UInt16(bigEndian: address.sin_port))
    source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
    source.setEventHandler {
      var batch: [Int32] = []
      while batch.count < 256 {
        let client = accept(fd, nil, nil)
        if client < 0 { break }  // EAGAIN: drained; other errors (EMFILE): retried on the next event
        _ = fcntl(client, F_SETFD, FD_CLOEXEC)
        // lws sets TCP_NODELAY only on sockets its own listener accepts. Without it, Nagle holds
        // a relayed message back until the peer acks the previous small write (the ack of the
        // request): ~20 ms per message on loopback.
        var one: Int32 = 1
        _ = setsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        batch.append(client)
      }
      if !batch.isEmpty { accepted(batch) }
    }
    source.setCancelHandler { close(fd) }
    source.resume()
  }

  /// Stops accepting and closes the listening socket.
  func stop() { source.cancel() }
}
