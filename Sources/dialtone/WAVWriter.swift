import DialtoneSupport
import Foundation

/// Records 16-bit mono PCM into a WAV file. The header is written when the recording is
/// finished, so a file is complete only after `finish()`.
final class WAVWriter: Sendable {
  let path: String
  let sampleRate: Int
  private struct Recording: Sendable {
    var pcm = Data()
    var finished = false
  }
  private let recording = Locked(Recording())

  init(path: String, sampleRate: Int = 48_000) {
    self.path = path
    self.sampleRate = sampleRate
  }

  func append(_ samples: Data) {
    recording.withLock { if !$0.finished { $0.pcm.append(samples) } }
  }

  /// Writes the file; later audio is dropped.
  func finish() throws {
    let body: Data = recording.withLock {
      $0.finished = true
      return $0.pcm
    }
    var file = Data()
    func u32(_ v: Int) { withUnsafeBytes(of: UInt32(v).littleEndian) { file.append(contentsOf: $0) } }
    func u16(_ v: Int) { withUnsafeBytes(of: UInt16(v).littleEndian) { file.append(contentsOf: $0) } }
    file.append(contentsOf: Array("RIFF".utf8))
    u32(36 + body.count)
    file.append(contentsOf: Array("WAVE".utf8))
    file.append(contentsOf: Array("fmt ".utf8))
    u32(16)
    u16(1)
    u16(1)
    u32(sampleRate)
    u32(sampleRate * 2)
    u16(2)
    u16(16)
    file.append(contentsOf: Array("data".utf8))
    u32(body.count)
    file.append(body)
    try file.write(to: URL(fileURLWithPath: path))
  }
}
