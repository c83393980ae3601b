import DialtoneFuzzTargets
import Foundation
import Testing

/// Every seed and every input that once crashed a fuzzer (FuzzTesting/Corpus and
/// FuzzTesting/Regressions), through the harnesses' own code: a regression fails `make test`
/// without a fuzzing build.
struct FuzzCorpusReplayTests {
  static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("FuzzTesting")

  static func inputs(of target: String) -> [URL] {
    ["Corpus", "Regressions"].flatMap { folder -> [URL] in
      let directory = root.appendingPathComponent(folder).appendingPathComponent("Fuzz" + target)
      let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
      return names.sorted().map { directory.appendingPathComponent($0) }
    }
  }

  @Test(arguments: FuzzTargets.all.keys.sorted())
  func everySavedInputRunsClean(_ target: String) throws {
    let run = try #require(FuzzTargets.all[target])
    let inputs = Self.inputs(of: target)
    #expect(!inputs.isEmpty, "FuzzTesting/Corpus/Fuzz\(target) has no seeds")
    for url in inputs {
      let bytes = try [UInt8](Data(contentsOf: url))
      // A pointer even for an empty input, as libFuzzer passes one.
      var padded = bytes + [0]
      padded.withUnsafeMutableBufferPointer { buffer in
        if let base = buffer.baseAddress { run(base, bytes.count) }
      }
    }
  }
}
