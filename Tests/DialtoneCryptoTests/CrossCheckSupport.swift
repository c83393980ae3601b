import Foundation

struct CrossCheckError: Error, CustomStringConvertible {
  let description: String
}

/// Runs Tests/python/jwt_crosscheck.py, which checks our tokens with PyJWT.
/// Missing python3 or PyJWT is a failure with instructions, never a skip.
enum CrossCheck {
  static let repositoryRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
  static let script = repositoryRoot.appendingPathComponent("Tests/python/jwt_crosscheck.py")

  struct Output {
    let status: Int32
    let stdout: String
    let stderr: String
  }

  static func run(_ arguments: [String]) throws -> Output {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", script.path] + arguments
    let stdout = Pipe()
    let stderr = Pipe()
    process.standardOutput = stdout
    process.standardError = stderr
    process.standardInput = FileHandle.nullDevice
    do {
      try process.run()
    } catch {
      throw CrossCheckError(description: "cannot start /usr/bin/env python3: \(error)")
    }
    let out = stdout.fileHandleForReading.readDataToEndOfFile()
    let err = stderr.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let output = Output(
      status: process.terminationStatus,
      stdout: String(decoding: out, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines),
      stderr: String(decoding: err, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    switch output.status {
    case 127:
      throw CrossCheckError(description: "python3 is not on PATH; run scripts/deps.sh (\(output.stderr))")
    case 2:
      throw CrossCheckError(description: "jwt_crosscheck.py could not run: \(output.stderr)")
    default:
      return output
    }
  }

  /// Runs a command that must succeed and returns its standard output.
  static func succeed(_ arguments: [String]) throws -> String {
    let output = try run(arguments)
    guard output.status == 0 else {
      throw CrossCheckError(description: "jwt_crosscheck.py \(arguments.first ?? "") failed: \(output.stderr)")
    }
    return output.stdout
  }

  /// Key PEMs by file name (see KEY_FILES in the script), generated once per test run.
  static let keys: Result<[String: String], CrossCheckError> = Result { () throws(CrossCheckError) in
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("dialtone-jwt-keys-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    do {
      let listing = try succeed(["genkeys", directory.path])
      guard let names = try JSONSerialization.jsonObject(with: Data(listing.utf8)) as? [String] else {
        throw CrossCheckError(description: "genkeys printed no file list: \(listing)")
      }
      var keys: [String: String] = [:]
      for name in names {
        keys[name] = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
      }
      return keys
    } catch let error as CrossCheckError {
      throw error
    } catch {
      throw CrossCheckError(description: "generating keys failed: \(error)")
    }
  }

  static func key(_ name: String) throws -> String {
    let keys = try self.keys.get()
    guard let pem = keys[name] else { throw CrossCheckError(description: "genkeys wrote no \(name)") }
    return pem
  }
}
