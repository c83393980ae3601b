/// Which of a Redis Cluster's 16,384 hash slots a key lives in: CRC16 (XMODEM: polynomial
/// 0x1021, initial value 0) of the key modulo 16384, or of its hash tag, the bytes between the
/// first `{` and the first `}` after it when there are any (so `dt:session:{id}:meta` and
/// `dt:session:{id}:log` share a slot). The cluster specification's own rule and test vector.
public enum RedisSlot {
  public static let count = 16384

  public static func of(_ key: [UInt8]) -> Int {
    Int(crc16(hashed(key)[...]) % UInt16(count))
  }

  public static func of(_ key: String) -> Int { of(Array(key.utf8)) }

  /// The part of the key that is hashed.
  static func hashed(_ key: [UInt8]) -> ArraySlice<UInt8> {
    guard let open = key.firstIndex(of: UInt8(ascii: "{")),
      let close = key[(open + 1)...].firstIndex(of: UInt8(ascii: "}")), close > open + 1
    else { return key[...] }
    return key[(open + 1)..<close]
  }

  static func crc16(_ bytes: ArraySlice<UInt8>) -> UInt16 {
    var crc: UInt16 = 0
    for byte in bytes {
      crc = (crc << 8) ^ table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ byte)]
    }
    return crc
  }

  private static let table: [UInt16] = (0..<256).map { index in
    var crc = UInt16(index) << 8
    for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
    return crc
  }

  /// The keys a command names, as the cluster routes it: nil for a command with none (PING,
  /// SCRIPT LOAD), which any server answers.
  static func keys(of command: [RedisArgument]) -> [[UInt8]]? {
    guard let name = command.first.map({ String(decoding: $0.bytes, as: UTF8.self).uppercased() }) else { return nil }
    let rest = command.dropFirst().map { $0.bytes }
    switch name {
    case "EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO":
      guard rest.count >= 2, let count = Int(String(decoding: rest[1], as: UTF8.self)), count >= 0,
        rest.count >= 2 + count
      else { return nil }
      return count == 0 ? nil : Array(rest[2..<(2 + count)])
    case "XREAD", "XREADGROUP":
      guard let streams = rest.firstIndex(where: { String(decoding: $0, as: UTF8.self).uppercased() == "STREAMS" })
      else { return nil }
      let tail = Array(rest[(streams + 1)...])
      return tail.isEmpty ? nil : Array(tail.prefix(tail.count / 2))
    case "DEL", "EXISTS", "UNLINK", "TOUCH", "MGET", "WATCH":
      return rest.isEmpty ? nil : rest
    case "PING", "INFO", "SCRIPT", "CLUSTER", "FLUSHALL", "FLUSHDB", "KEYS", "DBSIZE", "MULTI", "EXEC", "DISCARD",
      "ASKING", "READONLY", "AUTH", "SELECT", "HELLO", "CLIENT", "CONFIG", "TIME", "WAIT", "DEBUG", "ECHO":
      return nil
    default:
      return rest.first.map { [$0] }
    }
  }
}
