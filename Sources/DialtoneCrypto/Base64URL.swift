/// Base64url (RFC 4648 §5) without padding, as JOSE requires.
public enum Base64URL {
  public static func encode(_ bytes: some Sequence<UInt8>) -> String {
    Base64Codec.encode(Array(bytes), alphabet: Base64Codec.urlAlphabet, pad: false)
  }

  /// Accepts input with or without `=` padding; rejects characters outside the
  /// url-safe alphabet and non-canonical encodings, so one value has one text form.
  public static func decode(_ text: String) -> [UInt8]? {
    Base64Codec.decode(Array(text.utf8), table: Base64Codec.urlTable, allowPadding: true)
  }

  /// Strict JWS-segment form: compact serialization never carries padding.
  static func decodeUnpadded(_ text: some Collection<UInt8>) -> [UInt8]? {
    Base64Codec.decode(Array(text), table: Base64Codec.urlTable, allowPadding: false)
  }
}

/// Standard base64 (RFC 4648 §4) with padding, e.g. for TURN REST credentials.
public enum Base64 {
  public static func encode(_ bytes: some Sequence<UInt8>) -> String {
    Base64Codec.encode(Array(bytes), alphabet: Base64Codec.standardAlphabet, pad: true)
  }

  public static func decode(_ text: String) -> [UInt8]? {
    Base64Codec.decode(Array(text.utf8), table: Base64Codec.standardTable, allowPadding: true)
  }
}

enum Base64Codec {
  static let standardAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
  static let urlAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
  static let standardTable = reverseTable(standardAlphabet)
  static let urlTable = reverseTable(urlAlphabet)

  private static let invalid: UInt8 = 0xFF
  private static let padByte = UInt8(ascii: "=")

  private static func reverseTable(_ alphabet: [UInt8]) -> [UInt8] {
    var table = [UInt8](repeating: invalid, count: 256)
    for (index, char) in alphabet.enumerated() { table[Int(char)] = UInt8(index) }
    return table
  }

  static func encode(_ bytes: [UInt8], alphabet: [UInt8], pad: Bool) -> String {
    var out: [UInt8] = []
    out.reserveCapacity((bytes.count + 2) / 3 * 4)
    var index = 0
    while index + 3 <= bytes.count {
      let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
      out.append(alphabet[Int(chunk >> 18 & 0x3F)])
      out.append(alphabet[Int(chunk >> 12 & 0x3F)])
      out.append(alphabet[Int(chunk >> 6 & 0x3F)])
      out.append(alphabet[Int(chunk & 0x3F)])
      index += 3
    }
    switch bytes.count - index {
    case 1:
      let chunk = UInt32(bytes[index]) << 16
      out.append(alphabet[Int(chunk >> 18 & 0x3F)])
      out.append(alphabet[Int(chunk >> 12 & 0x3F)])
      if pad {
        out.append(padByte)
        out.append(padByte)
      }
    case 2:
      let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
      out.append(alphabet[Int(chunk >> 18 & 0x3F)])
      out.append(alphabet[Int(chunk >> 12 & 0x3F)])
      out.append(alphabet[Int(chunk >> 6 & 0x3F)])
      if pad { out.append(padByte) }
    default:
      break
    }
    return String(decoding: out, as: UTF8.self)
  }

  static func decode(_ text: [UInt8], table: [UInt8], allowPadding: Bool) -> [UInt8]? {
    var chars = text
    var padding = 0
    while let last = chars.last, last == padByte {
      chars.removeLast()
      padding += 1
    }
    if padding > 0 {
      // Padding is all-or-nothing: it must complete the final quantum exactly.
      guard allowPadding, padding <= 2, (chars.count + padding) % 4 == 0 else { return nil }
    }
    let remainder = chars.count % 4
    guard remainder != 1 else { return nil }

    var out: [UInt8] = []
    out.reserveCapacity(chars.count / 4 * 3 + 2)
    var index = 0
    while index + 4 <= chars.count {
      let a = table[Int(chars[index])]
      let b = table[Int(chars[index + 1])]
      let c = table[Int(chars[index + 2])]
      let d = table[Int(chars[index + 3])]
      guard a < 64, b < 64, c < 64, d < 64 else { return nil }
      let chunk = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
      out.append(UInt8(chunk >> 16 & 0xFF))
      out.append(UInt8(chunk >> 8 & 0xFF))
      out.append(UInt8(chunk & 0xFF))
      index += 4
    }
    switch remainder {
    case 2:
      let a = table[Int(chars[index])]
      let b = table[Int(chars[index + 1])]
      // Leftover low bits must be zero, otherwise several texts decode to the same bytes.
      guard a < 64, b < 64, b & 0x0F == 0 else { return nil }
      out.append(a << 2 | b >> 4)
    case 3:
      let a = table[Int(chars[index])]
      let b = table[Int(chars[index + 1])]
      let c = table[Int(chars[index + 2])]
      guard a < 64, b < 64, c < 64, c & 0x03 == 0 else { return nil }
      out.append(a << 2 | b >> 4)
      out.append((b & 0x0F) << 4 | c >> 2)
    default:
      break
    }
    return out
  }
}
