import DialtoneSupport

/// Where a sound file that stands in for a microphone (`GStreamerMedia.AudioSource.wavFile`) is
/// in its one playing: the clock of the first connection that started it. A microphone does not
/// start over when a call moves to a fresh connection (an ICE restart builds one: webrtcbin 1.22
/// cannot restart ICE in place), so neither does the file: each later connection of the same
/// media starts where the file is by now.
///
/// Times are nanoseconds of one monotonic clock (GStreamer's system clock).
final class AudioFilePlayback: Sendable {
  private let began = Locked<UInt64?>(nil)

  /// Where a connection that starts playing at `now` starts in the file, ns: 0 for the first,
  /// the time since the first started for every later one.
  func position(startingAt now: UInt64) -> UInt64 {
    began.withLock { began in
      guard let start = began else {
        began = now
        return 0
      }
      return now > start ? now - start : 0
    }
  }
}
