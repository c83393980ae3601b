import Foundation

/// A throwaway PKI made with the `openssl` command: a CA, a server certificate for 127.0.0.1 and
/// a client certificate it signed, and a second CA that signed nothing (for refusals). PEM files
/// in a temporary directory; `remove` deletes them.
public struct ScratchCertificates: Sendable {
  public let directory: String
  public var ca: String { directory + "/ca.crt" }
  public var otherCA: String { directory + "/other-ca.crt" }
  public var server: String { directory + "/server.crt" }
  public var serverKey: String { directory + "/server.key" }
  public var client: String { directory + "/client.crt" }
  public var clientKey: String { directory + "/client.key" }

  public init() throws {
    directory = NSTemporaryDirectory() + "dtpki-\(UUID().uuidString.prefix(8).lowercased())"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    for name in ["ca", "other-ca"] {
      try Self.openssl([
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
        "-subj", "/CN=dialtone test \(name)", "-keyout", "\(directory)/\(name).key", "-out",
        "\(directory)/\(name).crt",
      ])
    }
    try "subjectAltName=IP:127.0.0.1\n".write(toFile: directory + "/server.ext", atomically: true, encoding: .utf8)
    try "extendedKeyUsage=clientAuth\n".write(toFile: directory + "/client.ext", atomically: true, encoding: .utf8)
    for (name, subject) in [("server", "/CN=127.0.0.1"), ("client", "/CN=dialtone-node")] {
      try Self.openssl([
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", subject,
        "-keyout", "\(directory)/\(name).key", "-out", "\(directory)/\(name).csr",
      ])
      try Self.openssl([
        "x509", "-req", "-in", "\(directory)/\(name).csr", "-CA", "\(directory)/ca.crt", "-CAkey",
        "\(directory)/ca.key", "-CAcreateserial", "-days", "2", "-extfile", "\(directory)/\(name).ext", "-out",
        "\(directory)/\(name).crt",
      ])
    }
    // Read by servers that run as another user (PostgreSQL under its own account).
    for file in ["ca.crt", "server.crt", "server.key"] {
      _ = chmod(directory + "/" + file, 0o644)
    }
    _ = chmod(directory, 0o755)
  }

  public func remove() { try? FileManager.default.removeItem(atPath: directory) }

  private static func openssl(_ arguments: [String]) throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
      throw ScratchProcess.Failure("openssl \(arguments.first ?? "") exited \(process.terminationStatus)")
    }
  }
}
