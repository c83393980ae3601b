import DialtoneProtocol
import DialtoneSupport
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A UDP relay a test puts between two WebRTC peers: each side's host candidates are rewritten to
/// name one of the relay's ports instead, so every packet between them (STUN, DTLS, SRTP) passes
/// through here, and the test can drop everything one side sends for as long as it wants.
///
/// One socket faces each side's peer: what B sends to `a`'s port goes on to A from `b`'s port, and
/// back. Only the first UDP host candidate of each side is relayed (the peers bundle everything on
/// one component); other candidates are withheld, so no direct path exists. It sends only to the
/// addresses those candidates name (the test namespace's).
final class UDPRelay: Sendable {
  enum Side: Sendable { case a, b }

  struct Failure: Error, CustomStringConvertible {
    let description: String
  }

  private struct State {
    /// Each side's real address (from its candidate), where packets for it go.
    var addressOfA: sockaddr_in?
    var addressOfB: sockaddr_in?
    var droppingFromA = false
    var droppedFromA = 0
    var forwardedRTPFromA = 0
    var stopped = false
  }

  /// `faceOfA`: the socket B sends to, believing it is A; `faceOfB` the one A sends to.
  private let faceOfA: Int32
  private let faceOfB: Int32
  private let portOfA: UInt16
  private let portOfB: UInt16
  private let state = Locked(State())
  private let finished = DispatchSemaphore(value: 0)

  /// Binds both faces on every address (the peers' own address is where they reach them).
  init() throws {
    var ports: [UInt16] = []
    var sockets: [Int32] = []
    for _ in 0..<2 {
      let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
      guard fd >= 0 else { throw Failure(description: "socket() failed: errno \(errno)") }
      var address = sockaddr_in()
      address.sin_family = sa_family_t(AF_INET)
      address.sin_addr.s_addr = INADDR_ANY
      var length = socklen_t(MemoryLayout<sockaddr_in>.size)
      let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
        }
      }
      guard bound else {
        close(fd)
        for fd in sockets { close(fd) }
        throw Failure(description: "cannot bind a UDP socket: errno \(errno)")
      }
      sockets.append(fd)
      ports.append(UInt16(bigEndian: address.sin_port))
    }
    (faceOfA, faceOfB) = (sockets[0], sockets[1])
    (portOfA, portOfB) = (ports[0], ports[1])
    let relay = self
    Thread.detachNewThread { relay.run() }
  }

  /// `candidate` from `side`, rewritten to name the relay's face of that side; nil for one the
  /// relay does not carry (not UDP, not a host candidate, or not the side's first).
  func relayed(_ candidate: IceCandidate, from side: Side) -> IceCandidate? {
    // candidate:<foundation> <component> <transport> <priority> <address> <port> typ <type> ...
    var fields = candidate.candidate.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
    guard fields.count >= 8, fields[2].lowercased() == "udp", fields[6] == "typ", fields[7] == "host",
      let port = UInt16(fields[5])
    else { return nil }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    guard inet_pton(AF_INET, fields[4], &address.sin_addr) == 1 else { return nil }
    let taken = state.withLock { state -> Bool in
      switch side {
      case .a where state.addressOfA == nil: state.addressOfA = address
      case .b where state.addressOfB == nil: state.addressOfB = address
      default: return false
      }
      return true
    }
    guard taken else { return nil }
    fields[5] = String(side == .a ? portOfA : portOfB)
    var rewritten = candidate
    rewritten.candidate = fields.joined(separator: " ")
    return rewritten
  }

  /// From now on (or no longer), everything A sends is dropped.
  func dropFromA(_ dropping: Bool) { state.withLock { $0.droppingFromA = dropping } }

  /// Packets from A dropped so far.
  var droppedFromA: Int { state.withLock { $0.droppedFromA } }

  /// RTP packets (SRTP leaves the header in the clear) that went on from A to B so far.
  var forwardedRTPFromA: Int { state.withLock { $0.forwardedRTPFromA } }

  func stop() {
    state.withLock { $0.stopped = true }
    finished.wait()
    close(faceOfA)
    close(faceOfB)
  }

  private func run() {
    defer { finished.signal() }
    var buffer = [UInt8](repeating: 0, count: 2048)
    while !state.withLock({ $0.stopped }) {
      var polled = [
        pollfd(fd: faceOfA, events: Int16(POLLIN), revents: 0), pollfd(fd: faceOfB, events: Int16(POLLIN), revents: 0),
      ]
      guard poll(&polled, 2, 50) > 0 else { continue }
      // From B (to A's face) and from A (to B's face).
      if polled[0].revents & Int16(POLLIN) != 0 { forward(from: faceOfA, buffer: &buffer, cameFromA: false) }
      if polled[1].revents & Int16(POLLIN) != 0 { forward(from: faceOfB, buffer: &buffer, cameFromA: true) }
    }
  }

  private func forward(from face: Int32, buffer: inout [UInt8], cameFromA: Bool) {
    let count = buffer.withUnsafeMutableBytes { recv(face, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
    guard count > 0 else { return }
    let packet = buffer[0..<count]
    let destination = state.withLock { state -> sockaddr_in? in
      guard cameFromA else { return state.addressOfA }
      if state.droppingFromA {
        state.droppedFromA += 1
        return nil
      }
      if Self.isRTP(packet) { state.forwardedRTPFromA += 1 }
      return state.addressOfB
    }
    guard var destination else { return }
    // Out through the other side's face: the receiver sees it come from where it believes the
    // sender is.
    let out = cameFromA ? faceOfA : faceOfB
    _ = packet.withUnsafeBytes { bytes in
      withUnsafePointer(to: &destination) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          sendto(out, bytes.baseAddress, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
      }
    }
  }

  /// RFC 7983: a first byte of 128...191 is RTP or RTCP; RFC 5761: payload types 64...95 are
  /// RTCP's.
  private static func isRTP(_ packet: ArraySlice<UInt8>) -> Bool {
    guard packet.count >= 12, let first = packet.first else { return false }
    let second = packet[packet.startIndex + 1]
    return (128...191).contains(first) && !(64...95).contains(second & 0x7F)
  }
}
