import DialtoneCommandLine
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A child process the CLI starts and owns (the server under benchmark).
final class ChildProcess {
  let process = Process()
  var pid: Int32 { process.processIdentifier }

  /// `input` and `output`: pipes for the child's stdin and stdout (else it shares this process's).
  init(_ path: String, _ arguments: [String], input: Pipe? = nil, output: Pipe? = nil) throws {
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    if let input { process.standardInput = input }
    if let output { process.standardOutput = output }
    try process.run()
  }

  func terminate() {
    guard process.isRunning else { return }
    process.terminate()
    process.waitUntilExit()
  }
}

/// RSS and CPU time of a process, from /proc.
struct ProcessStats {
  let rssBytes: Int
  let cpuSeconds: Double
  /// The kernel's share of `cpuSeconds` (system calls, and on loopback the receiver's TCP path).
  var systemSeconds: Double = 0

  /// Several processes together (a cluster's nodes and its Redis): RSS and CPU summed.
  static func read(pids: [Int32]) throws -> ProcessStats {
    var total = ProcessStats(rssBytes: 0, cpuSeconds: 0)
    for pid in pids {
      let one = try read(pid: pid)
      total = ProcessStats(
        rssBytes: total.rssBytes + one.rssBytes, cpuSeconds: total.cpuSeconds + one.cpuSeconds,
        systemSeconds: total.systemSeconds + one.systemSeconds)
    }
    return total
  }

  static func read(pid: Int32) throws -> ProcessStats {
    let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
    let rssKB =
      status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
      .flatMap { Int($0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") } ?? 0
    let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let afterName = stat.split(separator: ")").last.map { $0.split(separator: " ") } ?? []
    let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
    let utime = Double(afterName.count > 12 ? afterName[11] : "0") ?? 0
    let stime = Double(afterName.count > 12 ? afterName[12] : "0") ?? 0
    return ProcessStats(rssBytes: rssKB * 1024, cpuSeconds: (utime + stime) / ticks, systemSeconds: stime / ticks)
  }
}

extension ProcessStats {
  /// Each thread's time on a CPU so far, in nanoseconds, by thread id (for `ThreadTimes`).
  static func threadRunNanos(pid: Int32) -> [Int32: UInt64] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    var times: [Int32: UInt64] = [:]
    for task in tasks {
      // A thread may end between the listing and the read: it is then left out.
      guard let thread = Int32(task),
        let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/schedstat", encoding: .utf8),
        let nanos = text.split(separator: " ").first.flatMap({ UInt64($0) })
      else { continue }
      times[thread] = nanos
    }
    return times
  }

  /// This process's open descriptors.
  static func openDescriptors() -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
  }

  /// Waits (bounded) until fewer than `limit` descriptors are open.
  static func waitForOpenDescriptors(below limit: Int, seconds: Double) async {
    let deadline = Date().addingTimeInterval(seconds)
    while openDescriptors() >= limit, Date() < deadline {
      try? await Task.sleep(for: .milliseconds(100))
    }
  }
}

enum ResourceLimits {
  /// Raises the soft open-file limit to the hard one (20000 here): every socket is a descriptor.
  static func raiseOpenFiles() {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
    limit.rlim_cur = limit.rlim_max
    _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
  }
}

/// 127.0.0.1:`port` as the socket calls take it (`port` 0: one the kernel picks, for `bind`).
private func loopbackAddress(port: Int) -> sockaddr_in {
  var address = sockaddr_in()
  address.sin_family = sa_family_t(AF_INET)
  address.sin_addr.s_addr = inet_addr("127.0.0.1")
  address.sin_port = in_port_t(UInt16(port).bigEndian)
  return address
}

enum FreePort {
  /// Binds port 0 on loopback to learn a free port, then releases it for the child to use.
  static func pick() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw ArgumentError(message: "socket() failed") }
    defer { close(fd) }
    var address = loopbackAddress(port: 0)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
      }
    }
    guard bound else { throw ArgumentError(message: "cannot bind a loopback port") }
    return Int(UInt16(bigEndian: address.sin_port))
  }
}

enum TCPProbe {
  struct Socket {
    let fd: Int32
    func close() { Glibc.close(fd) }
  }

  static func connect(port: Int) throws -> Socket {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw ArgumentError(message: "socket() failed") }
    var address = loopbackAddress(port: port)
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
      }
    }
    guard connected else {
      Glibc.close(fd)
      throw ArgumentError(message: "connect failed")
    }
    return Socket(fd: fd)
  }
}

/// The path of another executable built next to this one.
func siblingBinary(_ name: String) -> String {
  let me = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
  return me.deletingLastPathComponent().appendingPathComponent(name).path
}
