import Foundation

/// Records 16-bit mono PCM into a WAV file. The header is written when the recording is
/// finished, so a file is complete only after `finish()`.
final class WAVWriter: @unchecked Sendable {
  // @unchecked: `pcm` and `finished` are only touched under `lock`.
  let path: String
  let sampleRate: Int
  private let lock = NSLock()
  private var pcm = Data()
  private var finished = false

  init(path: String, sampleRate: Int = 48_000) {
    self.path = path
    self.sampleRate = sampleRate
  }

  func append(_ samples: Data) {
    lock.withLock { if !finished { pcm.append(samples) } }
  }

  /// Writes the file; later audio is dropped.
  func finish() throws {
    let body = lock.withLock { () -> Data in
      finished = true
      return pcm
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
