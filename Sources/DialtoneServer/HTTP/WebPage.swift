import Foundation

/// One of the server's HTML pages: the copy embedded at build time, or, with `--web-root`, the
/// file of the same name in that directory, read again on every request so an operator's
/// edited page (or a developer's) shows on reload without rebuilding the server.
struct WebPage: Sendable {
  let fileName: String
  let embedded: [UInt8]
  let root: String?

  func body() -> [UInt8] {
    guard let root else { return embedded }
    let path = URL(fileURLWithPath: root).appendingPathComponent(fileName).path
    guard let data = FileManager.default.contents(atPath: path) else { return embedded }
    return [UInt8](data)
  }
}
