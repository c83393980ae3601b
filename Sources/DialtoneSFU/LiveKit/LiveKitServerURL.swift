import Foundation

/// Where LiveKit's server API lives, from the URL a deployment configures. That URL is usually
/// the one clients connect to (`wss://…`); the API is plain HTTP(S) on the same host and port,
/// so `ws` maps to `http` and `wss` to `https`, as LiveKit's SDKs do. A path is kept, for a
/// LiveKit behind a reverse proxy under a prefix.
package struct LiveKitServerURL: Sendable, Hashable {
  /// `http(s)://host[:port][/prefix]`, without a trailing slash.
  package let httpBase: String

  package init(_ text: String) throws(LiveKitRoomServiceError) {
    let trimmed = text.trimmingCharacters(in: .whitespaces)
    guard let separator = trimmed.range(of: "://") else { throw .invalidServerURL(text) }
    let scheme: String
    switch trimmed[..<separator.lowerBound].lowercased() {
    case "http", "ws": scheme = "http"
    case "https", "wss": scheme = "https"
    default: throw .invalidServerURL(text)
    }
    var rest = Substring(trimmed[separator.upperBound...])
    while rest.hasSuffix("/") { rest = rest.dropLast() }
    // A query or fragment would end up in the middle of every method's URL.
    guard let first = rest.first, first != "/", !rest.contains(where: { "?#@ \t".contains($0) }) else {
      throw .invalidServerURL(text)
    }
    httpBase = "\(scheme)://\(rest)"
  }

  /// `POST` here for the Twirp method `method` of `service` (e.g. `RoomService`, `DeleteRoom`).
  package func twirp(service: String, method: String) -> String {
    "\(httpBase)/twirp/livekit.\(service)/\(method)"
  }
}
