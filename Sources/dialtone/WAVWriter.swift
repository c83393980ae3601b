import DialtoneGStreamer
import DialtoneSupport
import Foundation

/// Records what is heard into a 16-bit mono WAV file, against the clock: what a loudspeaker
/// fed by the decoder would play (`PlayoutTimeline`), silence wherever audio was not there in
/// time, so a stall stays in the recording as long as it lasted. The header is written when
/// the recording is finished, so a file is complete only after `finish()`.
final class WAVWriter: Sendable {
  let path: String
  let sampleRate: Int
  private struct Recording: Sendable {
    var pcm = Data()
    var timeline: PlayoutTimeline
    var finished = false
    /// When the stream stopped for good (a participant left): the file ends there, not at
    /// `finish()`, unless audio came again since.
    var stoppedAt: UInt64?
    /// Samples skipped to catch up (they came too late to play) and silence written for what was
    /// not there in time.
    var lateSamples = 0
    var silentSamples = 0
  }
  private let recording: Locked<Recording>

  init(path: String, sampleRate: Int = 48_000) {
    self.path = path
    self.sampleRate = sampleRate
    recording = Locked(Recording(timeline: PlayoutTimeline(sampleRate: sampleRate)))
  }

  func append(_ audio: RemoteAudio) {
    recording.withLock { recording in
      guard !recording.finished else { return }
      recording.stoppedAt = nil
      let count = audio.samples.count / 2
      let placement = recording.timeline.place(count: count, arrived: audio.arrived, delay: audio.playoutDelay)
      recording.lateSamples += count - placement.kept.count
      recording.silentSamples += placement.silence
      if placement.silence > 0 { recording.pcm.append(Data(count: placement.silence * 2)) }
      if !placement.kept.isEmpty {
        let bytes =
          audio.samples.startIndex + placement.kept.lowerBound * 2..<audio.samples.startIndex
          + placement.kept.upperBound * 2
        recording.pcm.append(audio.samples[bytes])
      }
    }
  }

  /// Seconds of audio that came too late to be played, and of silence written in their place
  /// or for audio that never came.
  var summary: (late: Double, silent: Double, total: Double) {
    recording.withLock {
      (
        Double($0.lateSamples) / Double(sampleRate), Double($0.silentSamples) / Double(sampleRate),
        Double($0.pcm.count / 2) / Double(sampleRate)
      )
    }
  }

  /// The stream ended (its sender left the call): the recording's silence stops here. Audio that
  /// comes later (the sender is back) carries on against the clock.
  func stop() {
    recording.withLock { $0.stoppedAt = RemoteAudio.clockNow() }
  }

  /// Writes the file, ending it with the silence heard since the last audio (up to now, or up to
  /// `stop()`); later audio is dropped.
  func finish() throws {
    let body: Data = recording.withLock {
      if !$0.finished {
        let tail = $0.timeline.finish(at: $0.stoppedAt ?? RemoteAudio.clockNow())
        if tail > 0 { $0.pcm.append(Data(count: tail * 2)) }
      }
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
