#if canImport(Glibc)
  import Glibc
#endif

/// A resolved address to connect to, copied out of getaddrinfo's list so it can cross threads.
struct SocketAddress: Sendable {
  let family: Int32
  let type: Int32
  let proto: Int32
  let bytes: [UInt8]

  /// Resolves `host`. With `numericOnly` it never asks DNS (an IP literal, so it cannot block);
  /// else it may block, and runs off the engine thread.
  static func resolve(host: String, port: Int, numericOnly: Bool) -> Result<[SocketAddress], HTTP2Error> {
    var hints = addrinfo()
    hints.ai_family = AF_UNSPEC
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    if numericOnly { hints.ai_flags = AI_NUMERICHOST }
    var found: UnsafeMutablePointer<addrinfo>?
    let status = getaddrinfo(host, String(port), &hints, &found)
    guard status == 0 else {
      return .failure(HTTP2Error("cannot resolve \(host): \(String(cString: gai_strerror(status)))"))
    }
    defer { freeaddrinfo(found) }
    var addresses: [SocketAddress] = []
    var next = found
    while let entry = next {
      next = entry.pointee.ai_next
      guard let address = entry.pointee.ai_addr else { continue }
      addresses.append(
        SocketAddress(
          family: entry.pointee.ai_family, type: entry.pointee.ai_socktype, proto: entry.pointee.ai_protocol,
          bytes: Array(UnsafeRawBufferPointer(start: address, count: Int(entry.pointee.ai_addrlen)))))
    }
    return addresses.isEmpty ? .failure(HTTP2Error("no address for \(host)")) : .success(addresses)
  }

  /// A non-blocking socket with the connection under way: the descriptor, or why not. Done
  /// once the socket is writable (then `pendingError` says how it went).
  func startConnect() -> Result<Int32, HTTP2Error> {
    let descriptor = socket(family, type | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), proto)
    guard descriptor >= 0 else { return .failure(HTTP2Error("socket: \(String(cString: strerror(errno)))")) }
    // Every loop turn writes what it has in one go: Nagle would only hold the last segment back.
    var on: Int32 = 1
    setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
    let result = bytes.withUnsafeBytes { raw in
      Glibc.connect(descriptor, raw.baseAddress?.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
    }
    if result == 0 || errno == EINPROGRESS { return .success(descriptor) }
    let why = String(cString: strerror(errno))
    close(descriptor)
    return .failure(HTTP2Error(why))
  }

  /// The outcome of a non-blocking connect, once the socket is writable: nil if connected.
  static func pendingError(_ descriptor: Int32) -> String? {
    var error: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    guard getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &error, &length) == 0 else {
      return String(cString: strerror(errno))
    }
    return error == 0 ? nil : String(cString: strerror(error))
  }
}
