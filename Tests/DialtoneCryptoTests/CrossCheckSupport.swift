import DialtoneTestSupport
import Foundation

struct CrossCheckError: Error, CustomStringConvertible {
  let description: String
}

/// Runs Tests/python/jwt_crosscheck.py, which checks our tokens with PyJWT.
/// Missing python3 or PyJWT is a failure with instructions, never a skip.
enum CrossCheck {
  static let script = PythonScript("jwt_crosscheck.py")

  typealias Output = PythonScript.Output

  static func run(_ arguments: [String]) throws -> Output { try script.run(arguments) }

  /// Runs a command that must succeed and returns its standard output.
  static func succeed(_ arguments: [String]) throws -> String { try script.succeed(arguments) }

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
