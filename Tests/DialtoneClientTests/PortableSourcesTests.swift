import Foundation
import Testing

/// The platform-independent targets must build for iOS unchanged. No Apple SDK exists here, so
/// this checks what would break that build: every module they import must exist on Darwin,
/// and a libc module may only be imported on a branch that has a Darwin alternative.
@Suite struct PortableSourcesTests {
  static let portableTargets = ["DialtoneJSON", "DialtoneSupport", "DialtoneProtocol", "DialtoneClient"]
  /// Modules that exist on every platform the SDK supports, or are this package's own portable targets.
  static let portableModules: Set<String> = Set(["Foundation", "Dispatch", "Swift", "_Concurrency"])
    .union(portableTargets)
  /// libc modules: allowed only under `#if canImport(...)` with a Darwin branch in the same file.
  static let libcModules: Set<String> = ["Glibc", "Musl", "Darwin", "ucrt", "WinSDK", "Android", "Bionic"]

  static var sourcesDirectory: URL {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent().appendingPathComponent("Sources")
  }

  struct Import: Equatable {
    var module: String
    var line: Int
    /// The `#if` conditions the import sits under, innermost last.
    var conditions: [String]
  }

  /// Every `import` of a file, with the `#if`/`#elseif` conditions around it.
  static func imports(of text: String) -> [Import] {
    var found: [Import] = []
    var stack: [String] = []
    for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
      let line = raw.trimmingCharacters(in: .whitespaces)
      if line.hasPrefix("#if ") {
        stack.append(String(line.dropFirst(4)))
      } else if line.hasPrefix("#elseif ") {
        if !stack.isEmpty { stack[stack.count - 1] = String(line.dropFirst(8)) }
      } else if line.hasPrefix("#else") {
        if !stack.isEmpty { stack[stack.count - 1] = "!(" + stack[stack.count - 1] + ")" }
      } else if line.hasPrefix("#endif") {
        _ = stack.popLast()
      } else if let module = importedModule(line) {
        found.append(Import(module: module, line: index + 1, conditions: stack))
      }
    }
    return found
  }

  /// "import X", "@preconcurrency import X", "public import X", "import struct X.Y" → X.
  static func importedModule(_ line: String) -> String? {
    var words = line.split(separator: " ").map(String.init)
    while let first = words.first,
      first.hasPrefix("@") || ["public", "internal", "package", "private", "fileprivate"].contains(first)
    {
      words.removeFirst()
    }
    guard words.first == "import", words.count >= 2 else { return nil }
    let kinds: Set<String> = ["struct", "class", "enum", "protocol", "func", "var", "let", "typealias"]
    let path = kinds.contains(words[1]) && words.count >= 3 ? words[2] : words[1]
    return path.split(separator: ".").first.map(String.init)
  }

  /// Why a file's imports would not build on Darwin (empty: they would).
  static func problems(in text: String, file: String) -> [String] {
    let all = imports(of: text)
    let hasDarwinBranch = all.contains {
      $0.module == "Darwin" && $0.conditions.contains { $0.contains("canImport(Darwin)") }
    }
    var problems: [String] = []
    for item in all {
      if libcModules.contains(item.module) {
        let guarded = item.conditions.contains { $0.contains("canImport(\(item.module))") }
        if !guarded || !hasDarwinBranch {
          problems.append(
            "\(file):\(item.line): `import \(item.module)` needs `#if canImport(\(item.module))` and a `canImport(Darwin)` branch"
          )
        }
      } else if !portableModules.contains(item.module) {
        problems.append(
          "\(file):\(item.line): `import \(item.module)` is not available on every platform (C libraries and Linux-only modules stay out of the portable targets)"
        )
      }
    }
    return problems
  }

  @Test func everyPortableTargetImportsOnlyWhatDarwinHas() throws {
    var problems: [String] = []
    var files = 0
    for target in Self.portableTargets {
      let root = Self.sourcesDirectory.appendingPathComponent(target)
      let enumerator = try #require(FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil))
      for case let url as URL in enumerator where url.pathExtension == "swift" {
        files += 1
        let text = try String(contentsOf: url, encoding: .utf8)
        problems += Self.problems(in: text, file: "\(target)/\(url.lastPathComponent)")
      }
    }
    #expect(files > 20)
    #expect(problems == [])
  }

  // The check itself: it catches what broke the iOS build before, and accepts the fix.
  @Test func theCheckCatchesALinuxOnlyImport() {
    #expect(!Self.problems(in: "#if canImport(Glibc)\nimport Glibc\n#endif\n", file: "f").isEmpty)
    #expect(!Self.problems(in: "import Glibc\n", file: "f").isEmpty)
    #expect(!Self.problems(in: "import COpenSSL\n", file: "f").isEmpty)
    #expect(!Self.problems(in: "@preconcurrency import DialtoneNet\n", file: "f").isEmpty)
    #expect(!Self.problems(in: "import FoundationNetworking\n", file: "f").isEmpty)
    #expect(!Self.problems(in: "internal import struct CSQLite.sqlite3\n", file: "f").isEmpty)
    let fixed =
      "#if canImport(Darwin)\nimport Darwin\n#elseif canImport(Glibc)\nimport Glibc\n#endif\nimport Foundation\n"
    #expect(Self.problems(in: fixed, file: "f") == [])
  }
}
