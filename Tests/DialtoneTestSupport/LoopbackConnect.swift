import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// 127.0.0.1:`port` as the socket calls take it (`port` 0: one the kernel picks, for `bind`).
func loopbackAddress(port: Int) -> sockaddr_in {
  var address = sockaddr_in()
  address.sin_family = sa_family_t(AF_INET)
  address.sin_addr.s_addr = inet_addr("127.0.0.1")
  address.sin_port = UInt16(clamping: port).bigEndian
  return address
}

/// A TCP socket connected to 127.0.0.1:`port`, or nil. A `receiveBuffer` (bytes) set before the
/// connect shrinks the window the kernel can absorb for a peer that never reads.
public func connectLoopback(port: Int, receiveBuffer: Int32? = nil) -> Int32? {
  let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
  guard fd >= 0 else { return nil }
  if var size = receiveBuffer {
    _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
  }
  var address = loopbackAddress(port: port)
  let connected = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
      Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
    }
  }
  guard connected else {
    close(fd)
    return nil
  }
  return fd
}
