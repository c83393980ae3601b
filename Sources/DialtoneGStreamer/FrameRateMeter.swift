/// Decoded frames per second the way the W3C stats count them (`framesPerSecond`,
/// webrtc-stats 8.4): the frames of the last second. Keeps at most `capacity` arrival times,
/// so a fast stream costs a fixed amount of memory.
struct FrameRateMeter: Sendable, Equatable {
  static let capacity = 240
  private var times: [Double] = []
  private var next = 0

  /// `seconds`: the frame's arrival time on any monotonic clock.
  mutating func frame(at seconds: Double) {
    if times.count < Self.capacity {
      times.append(seconds)
    } else {
      times[next] = seconds
      next = (next + 1) % Self.capacity
    }
  }

  /// Frames that arrived within the second before `now`.
  func framesPerSecond(at now: Double) -> Double {
    Double(times.reduce(0) { $0 + ($1 > now - 1 && $1 <= now ? 1 : 0) })
  }
}
