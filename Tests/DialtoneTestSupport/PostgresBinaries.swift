import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Where the server programs are and how to run them. A missing server is an error with
/// instructions, never a skip.
public struct PostgresBinaries: Sendable {
  public struct Missing: Error, CustomStringConvertible {
    public let description: String
  }

  public let directory: String
  /// Prepended to every server command: initdb and postgres refuse to run as root, so as root
  /// they run as the `postgres` user (setpriv execs, so the child's pid is the server's own).
  public let launcher: [String]
  /// Who must own the scratch directory, when it is not us.
  public let owner: (uid: uid_t, gid: gid_t)?

  public func path(_ program: String) -> String { directory + "/" + program }

  /// `DIALTONE_POSTGRES_BIN`, else Debian's /usr/lib/postgresql/15/bin, else the newest other
  /// version there, else initdb on PATH.
  public static func locate() throws -> PostgresBinaries {
    let directory = try binaryDirectory()
    guard getuid() == 0 else { return PostgresBinaries(directory: directory, launcher: [], owner: nil) }
    guard let user = getpwnam("postgres") else {
      throw Missing(description: "running as root, but there is no `postgres` user to run the scratch server as")
    }
    guard
      let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].first(where: {
        FileManager.default.isExecutableFile(atPath: $0)
      })
    else { throw Missing(description: "running as root, but setpriv (util-linux) is missing") }
    return PostgresBinaries(
      directory: directory,
      launcher: [setpriv, "--reuid=\(user.pointee.pw_uid)", "--regid=\(user.pointee.pw_gid)", "--clear-groups", "--"],
      owner: (user.pointee.pw_uid, user.pointee.pw_gid))
  }

  private static func binaryDirectory() throws -> String {
    let required = ["initdb", "postgres", "pg_isready"]
    func complete(_ directory: String) -> Bool {
      required.allSatisfy { FileManager.default.isExecutableFile(atPath: directory + "/" + $0) }
    }
    if let override = ProcessInfo.processInfo.environment["DIALTONE_POSTGRES_BIN"] {
      guard complete(override) else {
        throw Missing(description: "DIALTONE_POSTGRES_BIN=\(override) lacks one of \(required)")
      }
      return override
    }
    let root = "/usr/lib/postgresql"
    let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [])
      .compactMap { Int($0) }.sorted { ($0 == 15 ? Int.max : $0) > ($1 == 15 ? Int.max : $1) }
    if let version = versions.first(where: { complete("\(root)/\($0)/bin") }) { return "\(root)/\(version)/bin" }
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    if let directory = path.split(separator: ":").map(String.init).first(where: complete) { return directory }
    throw Missing(
      description: "no PostgreSQL server (\(required.joined(separator: ", "))) in \(root)/*/bin or on PATH: "
        + "run scripts/deps.sh (Debian's postgresql package) or set DIALTONE_POSTGRES_BIN")
  }
}
