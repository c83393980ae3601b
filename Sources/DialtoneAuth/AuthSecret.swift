import DialtoneCrypto
import Foundation

/// The HS256 secret shared with the app's backend: configured, or generated once into the data
/// directory so that tokens minted by `dialtone token --data-dir` keep working across restarts.
public enum AuthSecret {
  public static let fileName = "auth-secret"

  public static func resolve(configured: String?, dataDirectory: String) throws -> [UInt8] {
    if let configured { return Array(configured.utf8) }
    return try loadOrCreate(dataDirectory: dataDirectory)
  }

  public static func loadOrCreate(dataDirectory: String) throws -> [UInt8] {
    let manager = FileManager.default
    try manager.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
    let path = (dataDirectory as NSString).appendingPathComponent(fileName)
    if let existing = try? String(contentsOfFile: path, encoding: .utf8) {
      let trimmed = existing.trimmingCharacters(in: .whitespacesAndNewlines)
      if trimmed.utf8.count >= 16 { return Array(trimmed.utf8) }
    }
    let secret = SecureRandom.token(byteCount: 32)
    guard manager.createFile(atPath: path, contents: Data((secret + "\n").utf8), attributes: [.posixPermissions: 0o600])
    else {
      throw AuthSecretError(description: "cannot write \(path)")
    }
    return Array(secret.utf8)
  }

  /// Reads an existing secret without creating one (for `dialtone token --data-dir`).
  public static func load(dataDirectory: String) -> [UInt8]? {
    let path = (dataDirectory as NSString).appendingPathComponent(fileName)
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
    let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
    return trimmed.isEmpty ? nil : Array(trimmed.utf8)
  }
}

public struct AuthSecretError: Error, Sendable, CustomStringConvertible {
  public let description: String
}
