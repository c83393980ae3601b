import DialtoneCrypto
import DialtoneJSON
import DialtoneProtocol
import Foundation

/// The repository root, for the Python mocks under Tests/mocks.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
  .deletingLastPathComponent()
  .deletingLastPathComponent()

/// A mock server process (Tests/mocks/*.py): started on a free port, its requests read back from
/// its JSON-lines log.
final class MockProcess: @unchecked Sendable {
  // @unchecked: immutable after init; the process object is only stopped once.
  let port: Int
  let directory: URL
  let logFile: URL
  private let process: Process

  init(script: String, arguments: (URL) -> [String]) throws {
    directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent(
      "dialtone-mock-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    logFile = directory.appendingPathComponent("requests.jsonl")
    process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments =
      ["python3", repositoryRoot.appendingPathComponent("Tests/mocks/\(script)").path] + arguments(directory)
      + ["--log", logFile.path]
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    // The mock prints "LISTENING <port>" once it accepts connections.
    var line = ""
    let handle = output.fileHandleForReading
    while !line.hasSuffix("\n") {
      let chunk = handle.availableData
      guard !chunk.isEmpty else {
        throw ProbeFailure(description: "\(script) exited before listening (is `pip install h2` done?)")
      }
      line += String(decoding: chunk, as: UTF8.self)
    }
    guard
      let port = line.split(separator: " ").last.flatMap({ Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) })
    else {
      throw ProbeFailure(description: "\(script) printed \(line)")
    }
    self.port = port
  }

  func requests() -> [JSONValue] {
    guard let text = try? String(contentsOf: logFile, encoding: .utf8) else { return [] }
    return text.split(separator: "\n").compactMap { JSONValue(parsing: Array($0.utf8)) }
  }

  /// Waits until the log satisfies `condition` (fails after `seconds`, never hangs).
  func waitFor(_ what: String, seconds: Double = 15, _ condition: ([JSONValue]) -> Bool) async throws -> [JSONValue] {
    let deadline = Date().addingTimeInterval(seconds)
    while true {
      let current = requests()
      if condition(current) { return current }
      guard Date() < deadline else {
        throw ProbeFailure(description: "timed out waiting for \(what); log: \(current.count) lines")
      }
      try await Task.sleep(for: .milliseconds(20))
    }
  }

  func stop() {
    // SIGKILL: the child may inherit a mask with SIGTERM blocked from libuv's threads; the log
    // is flushed line by line, so nothing is lost.
    if process.isRunning {
      kill(process.processIdentifier, SIGKILL)
      process.waitUntilExit()
    }
    try? FileManager.default.removeItem(at: directory)
  }
}

/// An APNs mock plus the .p8 key the server signs with.
struct APNsMock {
  let process: MockProcess
  let keyFile: String
  let keyID = "KEY1234567"
  let teamID = "TEAM123456"

  /// `arguments`: more of the mock's options (Tests/mocks/README.md), e.g. `--goaway-after 25`.
  static func start(_ arguments: [String] = []) throws -> APNsMock {
    let signer = try JWTSigner.generateES256()
    let directory = NSTemporaryDirectory() + "dialtone-p8-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let keyFile = directory + "/AuthKey.p8"
    let publicFile = directory + "/public.pem"
    try (signer.privateKeyPEM() ?? "").write(toFile: keyFile, atomically: true, encoding: .utf8)
    try (signer.publicKeyPEM ?? "").write(toFile: publicFile, atomically: true, encoding: .utf8)
    let process = try MockProcess(script: "apns_mock.py") { dir in
      [
        "--port", "0", "--cert-out", dir.path, "--key-pub", publicFile, "--key-id", "KEY1234567", "--team-id",
        "TEAM123456",
      ] + arguments
    }
    return APNsMock(process: process, keyFile: keyFile)
  }

  var baseURL: String { "https://127.0.0.1:\(process.port)" }
  var caFile: String { process.directory.appendingPathComponent("cert.pem").path }
}

struct FCMMock {
  let process: MockProcess

  static func start() throws -> FCMMock {
    FCMMock(
      process: try MockProcess(script: "fcm_mock.py") { dir in
        ["--port", "0", "--service-account-out", dir.path, "--project", "dialtone-test"]
      })
  }

  var baseURL: String { "http://127.0.0.1:\(process.port)" }
  var serviceAccountFile: String { process.directory.appendingPathComponent("service-account.json").path }
  var sends: [JSONValue] { process.requests().filter { $0["kind"]?.stringValue == "send" } }
}
