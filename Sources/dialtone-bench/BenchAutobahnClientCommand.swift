import DialtoneCommandLine
import DialtoneNet
import DialtoneSupport
import Foundation

/// `dialtone-bench ws-autobahn-client --url ws://127.0.0.1:N`: drives `WebSocketClient` through
/// the cases of an Autobahn fuzzing server (kosoku -m fuzzingserver; scripts/autobahn.py): asks
/// for the case count, runs every case echoing each message back, then asks for the reports.
enum BenchAutobahnClientCommand {
  static func run(_ arguments: ArgumentList) async throws -> Int32 {
    let base = try arguments.required("url")
    let agent = arguments.string("agent") ?? "dialtone"
    // The client's own default; the full run (Autobahn's 9.* sends up to 16 MiB) raises it.
    let maxMessageBytes = try arguments.int("max-message-bytes", default: 1 << 20)
    let caseSeconds = try arguments.double("case-seconds", default: 60)
    guard base.hasPrefix("ws://127.0.0.1:"), (1...(64 << 20)).contains(maxMessageBytes),
      caseSeconds > 0, caseSeconds <= 600
    else {
      throw ArgumentError(
        message: "--url must be ws://127.0.0.1:PORT, --max-message-bytes 1...67108864, --case-seconds up to 600")
    }
    let client = try WebSocketClient(maxMessageBytes: maxMessageBytes)
    // Awaited on every path: a shutdown left to a task nobody awaits lets the process exit with
    // the client's thread running, under OpenSSL's exit-time clean-up (the bench's SIGSEGV).
    do {
      let status = try await runCases(client, base: base, agent: agent, caseSeconds: caseSeconds)
      await client.shutdown()
      return status
    } catch {
      await client.shutdown()
      throw error
    }
  }

  private static func runCases(
    _ client: WebSocketClient, base: String, agent: String, caseSeconds: Double
  ) async throws -> Int32 {
    let countRun = try await runConnection(client, "\(base)/getCaseCount", seconds: 10)
    guard let text = countRun.firstText, let count = Int(text), (0...10_000).contains(count) else {
      FileHandle.standardError.write(Data("ws-autobahn-client: no case count from \(base)\n".utf8))
      return 1
    }
    var timedOut: [Int] = []
    for number in 1...max(count, 1) where count > 0 {
      let run = try await runConnection(
        client, "\(base)/runCase?case=\(number)&agent=\(agent)", seconds: caseSeconds, echo: true)
      if run.timedOut { timedOut.append(number) }
    }
    _ = try await runConnection(client, "\(base)/updateReports?agent=\(agent)", seconds: 10)
    print("ws-autobahn-client: ran \(count) cases" + (timedOut.isEmpty ? "" : ", timed out: \(timedOut)"))
    return timedOut.isEmpty ? 0 : 1
  }

  struct ConnectionRun: Sendable {
    var firstText: String?
    var timedOut = false
    var finished = false
  }

  /// One connection from connect to close (or `seconds`, after which it is closed and reported as
  /// timed out). With `echo`, every message goes back as it came.
  private static func runConnection(
    _ client: WebSocketClient, _ url: String, seconds: Double, echo: Bool = false
  ) async throws -> ConnectionRun {
    let state = Locked(ConnectionRun())
    let waiter = Locked<CheckedContinuation<Void, Never>?>(nil)
    let finish: @Sendable (_ timedOut: Bool) -> Void = { timedOut in
      let first = state.withLock { run -> Bool in
        guard !run.finished else { return false }
        run.finished = true
        run.timedOut = timedOut
        return true
      }
      if first { waiter.withLock { $0.take() }?.resume() }
    }
    var connection: WebSocketClientConnection?
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      waiter.withLock { $0 = continuation }
      do {
        connection = try client.connect(to: url) { event, connection in
          switch event {
          case .opened:
            break
          case .message(let bytes, let isText):
            if echo {
              if isText { connection.send(text: bytes) } else { connection.send(binary: bytes) }
            } else if isText {
              state.withLock { if $0.firstText == nil { $0.firstText = String(decoding: bytes, as: UTF8.self) } }
            }
          case .closed, .failed:
            finish(false)
          }
        }
      } catch {
        finish(false)
      }
      DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { finish(true) }
    }
    let run = state.withLock { $0 }
    if run.timedOut { connection?.close() }
    return run
  }
}
