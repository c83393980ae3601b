/// A request target (RFC 9112 §3.2) as handlers see it: the path percent-decoded, with `.` and
/// `..` segments resolved and repeated slashes collapsed (so `//v1/./me` is `/v1/me`), and the
/// query split into arguments at `&` and `;`, each decoded (`+` is a space there).
struct HTTPRequestTarget: Equatable {
  var path: String
  var query: [String: String]

  /// At most this many query arguments are kept; the rest are ignored.
  static let maxArguments = 64

  /// nil for a target that is not origin-form (`/path?query`), absolute-form
  /// (`http://host/path`) or `*`, or whose percent-encoding is broken.
  init?(_ target: ArraySlice<UInt8>) {
    guard let first = target.first else { return nil }
    var rest = target
    if first != UInt8(ascii: "/") {
      if target.elementsEqual("*".utf8) {
        self.init(path: "*", query: [:])
        return
      }
      // absolute-form: the path starts after the authority.
      let text = String(decoding: target, as: UTF8.self).lowercased()
      guard text.hasPrefix("http://") || text.hasPrefix("https://") else { return nil }
      let afterScheme = rest.index(rest.startIndex, offsetBy: text.hasPrefix("http://") ? 7 : 8)
      rest = rest[afterScheme...]
      guard let slash = rest.firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") }) else {
        self.init(path: "/", query: [:])
        return
      }
      rest = rest[slash...]
    }
    guard rest.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) else { return nil }
    let questionMark = rest.firstIndex(of: UInt8(ascii: "?"))
    let rawPath = rest[rest.startIndex..<(questionMark ?? rest.endIndex)]
    guard let decoded = Self.percentDecoded(rawPath, plusIsSpace: false), !decoded.contains(0) else { return nil }
    var query: [String: String] = [:]
    if let questionMark {
      let rawQuery = rest[(questionMark + 1)...]
      var kept = 0
      for argument in rawQuery.split(whereSeparator: { $0 == UInt8(ascii: "&") || $0 == UInt8(ascii: ";") }) {
        guard kept < Self.maxArguments else { break }
        let equals = argument.firstIndex(of: UInt8(ascii: "="))
        guard let name = Self.percentDecoded(argument[argument.startIndex..<(equals ?? argument.endIndex)]),
          let value = equals.map({ Self.percentDecoded(argument[($0 + 1)...]) }) ?? []
        else { return nil }
        if name.isEmpty { continue }
        query[String(decoding: name, as: UTF8.self)] = String(decoding: value, as: UTF8.self)
        kept += 1
      }
    }
    self.init(path: Self.normalized(decoded), query: query)
  }

  init(path: String, query: [String: String]) {
    self.path = path
    self.query = query
  }

  /// `%XX` decoded (and `+` as a space in queries); nil when a `%` is not followed by two hex digits.
  static func percentDecoded(_ bytes: ArraySlice<UInt8>, plusIsSpace: Bool = true) -> [UInt8]? {
    var decoded: [UInt8] = []
    decoded.reserveCapacity(bytes.count)
    var index = bytes.startIndex
    while index < bytes.endIndex {
      let byte = bytes[index]
      if byte == UInt8(ascii: "%") {
        guard index + 2 < bytes.endIndex, let high = hex(bytes[index + 1]), let low = hex(bytes[index + 2]) else {
          return nil
        }
        decoded.append(high << 4 | low)
        index += 3
        continue
      }
      decoded.append(plusIsSpace && byte == UInt8(ascii: "+") ? 0x20 : byte)
      index += 1
    }
    return decoded
  }

  private static func hex(_ byte: UInt8) -> UInt8? {
    switch byte {
    case 0x30...0x39: return byte - 0x30
    case 0x41...0x46: return byte - 0x41 + 10
    case 0x61...0x66: return byte - 0x61 + 10
    default: return nil
    }
  }

  /// Resolves `.` and `..` (never above the root), collapses repeated slashes, keeps a trailing one.
  private static func normalized(_ path: [UInt8]) -> String {
    var segments: [ArraySlice<UInt8>] = []
    for segment in path.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true) {
      if segment.elementsEqual(".".utf8) { continue }
      if segment.elementsEqual("..".utf8) {
        _ = segments.popLast()
        continue
      }
      segments.append(segment)
    }
    var result: [UInt8] = [UInt8(ascii: "/")]
    for (n, segment) in segments.enumerated() {
      if n > 0 { result.append(UInt8(ascii: "/")) }
      result.append(contentsOf: segment)
    }
    if path.count > 1, path.last == UInt8(ascii: "/"), !segments.isEmpty { result.append(UInt8(ascii: "/")) }
    return String(decoding: result, as: UTF8.self)
  }
}
