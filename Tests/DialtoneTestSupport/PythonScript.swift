import Foundation

/// A Python script of Tests/python run as a cross-check (our output checked by a reference
/// library). A missing python3 or a script that cannot run (exit 2: a missing module) is an
/// error with instructions, never a skip.
public struct PythonScript: Sendable {
  public struct Failure: Error, CustomStringConvertible {
    public let description: String
  }

  public struct Output: Sendable {
    public let status: Int32
    public let stdout: String
    public let stderr: String
  }

  public let url: URL
  /// Extra environment variables for the script.
  public let environment: [String: String]

  /// `name` is a file of Tests/python.
  public init(_ name: String, environment: [String: String] = [:]) {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent()
    url = root.appendingPathComponent("Tests/python").appendingPathComponent(name)
    self.environment = environment
  }

  public var name: String { url.lastPathComponent }

  public func run(_ arguments: [String]) throws(Failure) -> Output {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", url.path] + arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    let stdout = Pipe()
    let stderr = Pipe()
    process.standardOutput = stdout
    process.standardError = stderr
    process.standardInput = FileHandle.nullDevice
    do {
      try process.run()
    } catch {
      throw Failure(description: "cannot start /usr/bin/env python3: \(error); run scripts/deps.sh")
    }
    let out = stdout.fileHandleForReading.readDataToEndOfFile()
    let err = stderr.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let output = Output(
      status: process.terminationStatus,
      stdout: String(decoding: out, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines),
      stderr: String(decoding: err, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    switch output.status {
    case 127: throw Failure(description: "python3 is not on PATH; run scripts/deps.sh (\(output.stderr))")
    case 2: throw Failure(description: "\(name) could not run: \(output.stderr)")
    default: return output
    }
  }

  /// Runs a command that must succeed and returns its standard output.
  public func succeed(_ arguments: [String]) throws(Failure) -> String {
    let output = try run(arguments)
    guard output.status == 0 else {
      throw Failure(description: "\(name) \(arguments.first ?? "") failed: \(output.stderr)")
    }
    return output.stdout
  }
}
