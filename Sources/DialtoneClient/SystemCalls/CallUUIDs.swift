import DialtoneProtocol
import Foundation

/// The UUID the OS (CallKit) knows a call by.
///
/// A call id that is a UUID string (the recommended form) is that UUID; any other call id maps
/// to a deterministic name-based UUID (RFC 9562 version 5, SHA-1, in a Dialtone namespace), so
/// a push and a later `invite` for the same call always yield the same UUID on every device.
public enum CallUUIDs {
  /// The namespace of name-based call UUIDs.
  public static let namespace = UUID(
    uuid: (
      0x6b, 0x1f, 0x3c, 0x52, 0x9d, 0x04, 0x4e, 0x8a, 0xa1, 0x7e, 0x2c, 0x5d, 0x90, 0x13, 0xd4, 0x46
    ))

  public static func uuid(for callId: CallID) -> UUID {
    CallIDRules.uuid(of: callId) ?? nameBased(callId, namespace: namespace)
  }

  /// RFC 9562 version-5 UUID of `name` (UTF-8) in `namespace`.
  public static func nameBased(_ name: String, namespace: UUID) -> UUID {
    let ns = namespace.uuid
    var bytes: [UInt8] = [
      ns.0, ns.1, ns.2, ns.3, ns.4, ns.5, ns.6, ns.7, ns.8, ns.9, ns.10, ns.11, ns.12, ns.13, ns.14, ns.15,
    ]
    bytes.append(contentsOf: Array(name.utf8))
    var d = SHA1.digest(bytes)
    d[6] = (d[6] & 0x0F) | 0x50
    d[8] = (d[8] & 0x3F) | 0x80
    return UUID(
      uuid: (
        d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9], d[10], d[11], d[12], d[13], d[14], d[15]
      ))
  }
}

/// SHA-1, used only to derive name-based UUIDs (not for security).
enum SHA1 {
  static func digest(_ message: [UInt8]) -> [UInt8] {
    var h0: UInt32 = 0x6745_2301
    var h1: UInt32 = 0xEFCD_AB89
    var h2: UInt32 = 0x98BA_DCFE
    var h3: UInt32 = 0x1032_5476
    var h4: UInt32 = 0xC3D2_E1F0

    var data = message
    let bitLength = UInt64(message.count) &* 8
    data.append(0x80)
    while data.count % 64 != 56 { data.append(0) }
    for shift in stride(from: 56, through: 0, by: -8) {
      data.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift)))
    }

    var w = [UInt32](repeating: 0, count: 80)
    for chunk in stride(from: 0, to: data.count, by: 64) {
      for i in 0..<16 {
        let b = chunk + i * 4
        w[i] = UInt32(data[b]) << 24 | UInt32(data[b + 1]) << 16 | UInt32(data[b + 2]) << 8 | UInt32(data[b + 3])
      }
      for i in 16..<80 {
        let x = w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]
        w[i] = (x << 1) | (x >> 31)
      }
      var a = h0
      var b = h1
      var c = h2
      var d = h3
      var e = h4
      for i in 0..<80 {
        let f: UInt32
        let k: UInt32
        switch i {
        case 0..<20:
          f = (b & c) | (~b & d)
          k = 0x5A82_7999
        case 20..<40:
          f = b ^ c ^ d
          k = 0x6ED9_EBA1
        case 40..<60:
          f = (b & c) | (b & d) | (c & d)
          k = 0x8F1B_BCDC
        default:
          f = b ^ c ^ d
          k = 0xCA62_C1D6
        }
        let temp = ((a << 5) | (a >> 27)) &+ f &+ e &+ k &+ w[i]
        e = d
        d = c
        c = (b << 30) | (b >> 2)
        b = a
        a = temp
      }
      h0 = h0 &+ a
      h1 = h1 &+ b
      h2 = h2 &+ c
      h3 = h3 &+ d
      h4 = h4 &+ e
    }
    var out: [UInt8] = []
    out.reserveCapacity(20)
    for h in [h0, h1, h2, h3, h4] {
      out.append(UInt8(truncatingIfNeeded: h >> 24))
      out.append(UInt8(truncatingIfNeeded: h >> 16))
      out.append(UInt8(truncatingIfNeeded: h >> 8))
      out.append(UInt8(truncatingIfNeeded: h))
    }
    return out
  }
}
