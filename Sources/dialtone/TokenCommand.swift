import DialtoneAuth
import DialtoneCommandLine
import Foundation

/// `dialtone token`: what an app backend does for its users, for development and tests.
enum TokenCommand {
  static func run(_ arguments: ArgumentList) async throws -> Int32 {
    let user = try arguments.required("user")
    let ttl = try arguments.int("ttl", default: 3600)
    guard ttl > 0 else { throw ArgumentError(message: "--ttl must be positive") }
    let secret: [UInt8]
    if let given = arguments.string("secret") ?? ProcessInfo.processInfo.environment["DIALTONE_AUTH_SECRET"] {
      secret = Array(given.utf8)
    } else {
      let dataDirectory =
        arguments.string("data-dir") ?? ProcessInfo.processInfo.environment["DIALTONE_DATA_DIR"] ?? "./data"
      guard let stored = AuthSecret.load(dataDirectory: dataDirectory) else {
        throw ArgumentError(
          message:
            "no secret: pass --secret, or --data-dir of a server that has run once (\(dataDirectory)/\(AuthSecret.fileName) not found)"
        )
      }
      secret = stored
    }
    let token = try DevelopmentTokens.mint(
      secret: secret, user: user, device: arguments.string("device"),
      name: arguments.string("name"), ttl: TimeInterval(ttl))
    print(token)
    return 0
  }
}
