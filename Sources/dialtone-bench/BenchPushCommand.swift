import DialtoneBenchSlices
import DialtoneCommandLine
import DialtoneCrypto
import DialtoneHTTP2
import DialtoneJSON
import DialtoneProtocol
import DialtonePush
import Foundation

/// `dialtone-bench push`: VoIP pushes to the APNs mock (TLS HTTP/2, Tests/mocks/apns_mock.py)
/// over one multiplexed connection, with a bounded number in flight; then the same load through
/// aioapns against the same mock. Prints pushes/s and dispatch latency p50/p99.
enum BenchPushCommand {
  static func run(_ arguments: ArgumentList) async throws -> Int32 {
    let count = try arguments.int("pushes", default: 5000)
    let concurrency = try arguments.int("concurrency", default: 200)
    let root = arguments.string("repo") ?? FileManager.default.currentDirectoryPath
    let directory = NSTemporaryDirectory() + "dialtone-bench-push-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }

    let signer = try JWTSigner.generateES256()
    let keyFile = directory + "/AuthKey.p8"
    let publicFile = directory + "/public.pem"
    try (signer.privateKeyPEM() ?? "").write(toFile: keyFile, atomically: true, encoding: .utf8)
    try (signer.publicKeyPEM ?? "").write(toFile: publicFile, atomically: true, encoding: .utf8)
    let (mock, port) = try startMock(
      root: root,
      arguments: [
        "--port", "0", "--cert-out", directory, "--key-pub", publicFile,
        "--key-id", "KEY1234567", "--team-id", "TEAM123456",
      ])
    defer { mock.terminate() }
    let caFile = directory + "/cert.pem"

    // Dialtone's APNs client.
    let http = try HTTP2Client(configuration: .init(caFile: caFile))
    let apns = try APNsClient(
      configuration: .init(
        keyPEM: try String(contentsOfFile: keyFile, encoding: .utf8), keyID: "KEY1234567",
        teamID: "TEAM123456", baseURL: "https://127.0.0.1:\(port)"), http: http)
    let payload = IncomingCallPush(
      callId: "c", callerId: "alice", callerName: "Alice", hasVideo: false, createdAt: 1_732_880_000_000)
    let request = APNsRequest(
      deviceToken: String(repeating: "ab", count: 32), bundleID: "com.example.chat", environment: .production,
      pushType: .voip, payload: payload.apnsPayload.serialized)
    _ = try await pushAll(apns, request, count: min(200, count), concurrency: concurrency)  // warm-up: TLS, JWT
    let started = Date()
    let cpuBefore = processCPUSeconds()
    let (latencies, failures) = try await pushAll(apns, request, count: count, concurrency: concurrency)
    let cpuUsed = processCPUSeconds() - cpuBefore
    let elapsed = Date().timeIntervalSince(started)
    http.shutdown()
    let sorted = latencies.sorted()
    print(
      "bench-push: \(count) VoIP pushes, \(concurrency) in flight, one HTTP/2 connection, APNs mock (Python h2) on loopback"
    )
    print("client            pushes/s   p50 ms   p99 ms   failed")
    print(
      String(
        format: "dialtone          %8.0f  %7.2f  %7.2f   %d", Double(count) / elapsed, Quantile.of(sorted, 0.5) * 1000,
        Quantile.of(sorted, 0.99) * 1000, failures))
    // The mock caps throughput; the client's own cost says what one core could push.
    print(
      String(
        format: "dialtone CPU: %.1f µs per push (all threads) = %.0f pushes per CPU-second",
        cpuUsed / Double(count) * 1e6,
        Double(count) / max(cpuUsed, 1e-9)))

    // The same load through aioapns.
    let python = Process()
    python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    python.arguments = [
      "python3", root + "/bench/aioapns_bench.py", "\(port)", caFile, keyFile, "KEY1234567", "TEAM123456", "\(count)",
      "\(concurrency)",
    ]
    let output = Pipe()
    python.standardOutput = output
    try python.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    python.waitUntilExit()
    if let json = JSONValue(parsing: Array(data)), let rate = json["pushes_per_s"]?.doubleValue {
      print(
        String(
          format: "aioapns           %8.0f  %7.2f  %7.2f   %d", rate, json["p50_ms"]?.doubleValue ?? .nan,
          json["p99_ms"]?.doubleValue ?? .nan, json["failed"]?.intValue ?? -1))
      if let cpu = json["cpu_us_per_push"]?.doubleValue {
        print(String(format: "aioapns CPU: %.1f µs per push = %.0f pushes per CPU-second", cpu, 1e6 / cpu))
      }
    } else {
      print("aioapns: no result (pip install aioapns?): \(String(decoding: data, as: UTF8.self))")
    }
    return 0
  }

  private static func pushAll(_ apns: APNsClient, _ request: APNsRequest, count: Int, concurrency: Int) async throws
    -> ([Double], Int)
  {
    try await withThrowingTaskGroup(of: (Double, Bool).self) { group in
      var latencies: [Double] = []
      var failures = 0
      var started = 0
      func launch() {
        group.addTask {
          let begin = DispatchTime.now().uptimeNanoseconds
          let outcome = await apns.send(request)
          return (Double(DispatchTime.now().uptimeNanoseconds - begin) / 1e9, outcome == .delivered)
        }
        started += 1
      }
      while started < min(concurrency, count) { launch() }
      while let (latency, ok) = try await group.next() {
        latencies.append(latency)
        if !ok { failures += 1 }
        if started < count { launch() }
      }
      return (latencies, failures)
    }
  }

  private static func startMock(root: String, arguments: [String]) throws -> (Process, Int) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", root + "/Tests/mocks/apns_mock.py"] + arguments
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    var line = ""
    while !line.hasSuffix("\n") {
      let chunk = output.fileHandleForReading.availableData
      guard !chunk.isEmpty else { throw ArgumentError(message: "the APNs mock did not start (pip install h2?)") }
      line += String(decoding: chunk, as: UTF8.self)
    }
    guard let port = Int(line.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") else {
      throw ArgumentError(message: "the APNs mock printed \(line)")
    }
    return (process, port)
  }
}

/// User + system CPU time of this process (all threads), from getrusage.
private func processCPUSeconds() -> Double {
  var usage = rusage()
  getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
  return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
    + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}
