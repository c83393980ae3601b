internal import COpenSSL

enum OpenSSLSupport {
  /// Empties this thread's OpenSSL error queue and returns the newest reason.
  /// Draining matters beyond diagnostics: the queue is per thread and shared with
  /// every TLS user of libcrypto in the process, which may misread stale entries.
  @discardableResult
  static func drainErrors() -> String {
    var newest: UInt = 0
    while true {
      let code = ERR_get_error()
      if code == 0 { break }
      newest = code
    }
    guard newest != 0 else { return "unknown OpenSSL error" }
    var buffer = [CChar](repeating: 0, count: 256)
    ERR_error_string_n(newest, &buffer, buffer.count)
    let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
    return String(decoding: bytes, as: UTF8.self)
  }

  /// Failures here are not caused by input (allocation, provider loading), and
  /// carrying on could mean returning predictable or wrong bytes, so stop.
  static func fatal(_ operation: String) -> Never {
    fatalError("DialtoneCrypto: \(operation) failed: \(drainErrors())")
  }

  /// OpenSSL treats a NULL buffer as "argument missing" in some paths even when the
  /// length is zero, so empty inputs get a valid address of a zero-length region.
  static func withBytes<R>(_ bytes: [UInt8], _ body: (UnsafePointer<UInt8>, Int) -> R) -> R {
    bytes.withUnsafeBufferPointer { buffer in
      if let base = buffer.baseAddress { return body(base, buffer.count) }
      var placeholder: UInt8 = 0
      return withUnsafePointer(to: &placeholder) { body($0, 0) }
    }
  }
}
