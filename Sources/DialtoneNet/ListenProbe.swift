import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Checks that host:port can be bound before lws tries: lws 4.1 on libuv leaves a half-torn-down
/// context behind when its listen fails, which later crashes the process.
enum ListenProbe {
  static func check(host: String, port: Int) throws(NetError) {
    guard port != 0 else { return }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(clamping: port).bigEndian)
    let parsed: Int32 = host.withCString { inet_pton(AF_INET, $0, &address.sin_addr) }
    guard parsed == 1 else { return }  // not a literal IPv4 address: let lws resolve it
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return }
    defer { close(fd) }
    var one: Int32 = 1
    _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
    guard bound, listen(fd, 1) == 0 else {
      throw .listenFailed("cannot listen on \(host):\(port): \(String(cString: strerror(errno)))")
    }
  }
}
