import DialtoneClient
import Foundation

/// The Linux softphone's network path monitor (iOS has `NWPathMonitor`): the host's addresses,
/// read every half second; when they change (an address went, another came: the path in use
/// died), `changed` runs, and the softphone reconnects signaling at once instead of waiting for
/// a ping on the dead socket to go unanswered (up to half a heartbeat and a ping timeout, over
/// 20 s). The media recovers on its own (the engine's ICE restart), and only then through
/// the new socket.
enum InterfaceWatch {
  static let interval: Duration = .milliseconds(500)

  /// Polls until the task is cancelled.
  static func start(_ changed: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
    Task.detached {
      var watch = NetworkPathWatch()
      _ = watch.update(interfaces: addresses())
      while !Task.isCancelled {
        try? await Task.sleep(for: interval)
        if watch.update(interfaces: addresses()) { await changed() }
      }
    }
  }

  /// "interface address" of every interface that is up, loopback excepted, sorted.
  static func addresses() -> [String] {
    var first: UnsafeMutablePointer<ifaddrs>?
    guard getifaddrs(&first) == 0, let first else { return [] }
    defer { freeifaddrs(first) }
    var found: [String] = []
    var cursor: UnsafeMutablePointer<ifaddrs>? = first
    while let entry = cursor {
      defer { cursor = entry.pointee.ifa_next }
      let flags = Int32(entry.pointee.ifa_flags)
      guard flags & Int32(IFF_UP) != 0, flags & Int32(IFF_LOOPBACK) == 0, let address = entry.pointee.ifa_addr
      else { continue }
      let family = Int32(address.pointee.sa_family)
      guard family == AF_INET || family == AF_INET6 else { continue }
      var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
      let length = socklen_t(family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
      guard getnameinfo(address, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST) == 0 else { continue }
      let name = String(cString: entry.pointee.ifa_name)
      found.append("\(name) \(String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
    }
    return found.sorted()
  }
}
