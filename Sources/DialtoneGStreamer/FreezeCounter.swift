/// Counts freezes in decoded video the way the W3C stats do (`freezeCount`,
/// webrtc-stats 8.4): a frame that comes later than max(3 × the mean frame interval,
/// mean + 150 ms) after the one before it ends a freeze. The mean is over the recent frames
/// (an exponential average), so a slower but steady stream is not a freeze.
struct FreezeCounter: Sendable, Equatable {
  private(set) var freezes = 0
  private var last: Double?
  private var meanInterval: Double?

  /// `seconds`: the frame's arrival time on any monotonic clock.
  mutating func frame(at seconds: Double) {
    defer { last = seconds }
    guard let last else { return }
    let interval = seconds - last
    guard interval >= 0 else { return }
    if let mean = meanInterval, interval > max(3 * mean, mean + 0.15) {
      freezes += 1
      return  // the freeze itself is not a frame interval
    }
    meanInterval = meanInterval.map { 0.9 * $0 + 0.1 * interval } ?? interval
  }
}
