/// The latency of the receiving jitter buffer (webrtcbin's `rtpjitterbuffer`): how long it waits
/// for a packet that has not come before it declares it lost (and the decoder conceals it).
/// Adapted to the delay spread of the arriving packets, as NetEQ sizes its buffer in a browser:
/// long enough that almost every packet is in time, no longer.
///
/// Every packet reaching the buffer is timed against its RTP timestamp (its transit time, up to
/// a constant). Its lateness is its transit less the shortest transit of the last two seconds.
/// A packet RED recovered counts too: it arrives with the packet that carried it, its lateness
/// the RED distance, so under loss the latency makes room for RED's repairs. Every `tick` (a
/// quarter of a second) the target is the 98th percentile of that window's lateness plus
/// `headroom`; packets the buffer still had to throw away as too late add a step on top. The
/// latency rises to the target at once and comes down only after the target stayed at least
/// `lowerBelow` under it for `lowerAfter`, a step at a time: rising costs the listener one
/// short gap, falling drops a little audio, so it falls rarely.
struct JitterBufferTarget: Sendable, Equatable {
  static let minimumMs = 20
  static let maximumMs = 300
  static let startMs = 40
  /// What the player adds after the buffer's latency: the decoder's FEC look-ahead (one 20 ms
  /// frame) and 10 ms of processing.
  static let playoutMarginMs = 30
  static let headroomMs = 5.0
  static let lateStepMs = 20
  static let lowerStepMs = 10
  static let lowerBelowMs = 15
  static let lowerAfter: Duration = .seconds(4)
  static let window: Duration = .seconds(2)
  /// Arrivals of the first second are not counted: the first packets wait for the receiver's
  /// DTLS and come in a burst, which says nothing of the path.
  static let settle: Duration = .seconds(1)
  /// At most this many arrivals are kept (50 packets a second for the window, and RED's).
  static let capacity = 250
  static let clockRate = 48_000.0

  private(set) var latencyMs = startMs
  private struct Arrival: Sendable, Equatable {
    var at: Duration
    /// Arrival time less the RTP time, ms (a constant apart from the transit time).
    var transit: Double
  }
  private var arrivals: [Arrival] = []
  /// The RTP timestamps seen, unwrapped (32-bit timestamps wrap every 25 hours at 48 kHz).
  private var lastTimestamp: UInt32?
  private var timestampBase: Int64 = 0
  private var lowSince: Duration?
  private var firstArrival: Duration?
  /// A latency that never adapts (for comparisons: webrtcbin's own way).
  let fixedMs: Int?

  init(fixedMs: Int? = nil) {
    self.fixedMs = fixedMs.map { min(Self.maximumMs, max(0, $0)) }
    if let fixed = self.fixedMs { latencyMs = fixed }
  }

  /// A packet with this RTP timestamp reached the buffer at `at` (any monotonic origin).
  mutating func arrival(rtpTimestamp: UInt32, at: Duration) {
    if let last = lastTimestamp {
      let step = Int64(Int32(bitPattern: rtpTimestamp &- last))
      timestampBase += step
    }
    lastTimestamp = rtpTimestamp
    if firstArrival == nil { firstArrival = at }
    if let first = firstArrival, at - first < Self.settle { return }
    let seconds = Double(at.components.seconds) + Double(at.components.attoseconds) / 1e18
    arrivals.append(Arrival(at: at, transit: seconds * 1000 - Double(timestampBase) / Self.clockRate * 1000))
    if arrivals.count > Self.capacity { arrivals.removeFirst(arrivals.count - Self.capacity) }
  }

  /// The lateness of the window's packets, ms, sorted.
  private var lateness: [Double] {
    guard let fastest = arrivals.map(\.transit).min() else { return [] }
    return arrivals.map { $0.transit - fastest }.sorted()
  }

  /// Re-evaluates the latency at `now`; `lateArrivals` is how many packets the buffer dropped
  /// as too late since the last tick. Returns the new latency when it changed.
  mutating func tick(now: Duration, lateArrivals: Int) -> Int? {
    guard fixedMs == nil else { return nil }
    arrivals.removeAll { now - $0.at > Self.window }
    var wanted = Double(Self.minimumMs)
    let sorted = lateness
    if !sorted.isEmpty {
      let p98 = sorted[min(sorted.count - 1, Int((Double(sorted.count) * 0.98).rounded(.down)))]
      wanted = max(wanted, p98 + Self.headroomMs)
    }
    if lateArrivals > 0 { wanted = max(wanted, Double(latencyMs + Self.lateStepMs)) }
    // Up to the next 5 ms; a hair over one (rounding of the transit times) stays on it.
    let target = min(Self.maximumMs, Int((wanted / 5 - 1e-6).rounded(.up)) * 5)
    let before = latencyMs
    if target > latencyMs {
      latencyMs = target
      lowSince = nil
    } else if target <= latencyMs - Self.lowerBelowMs {
      if let since = lowSince {
        if now - since >= Self.lowerAfter {
          latencyMs = max(target, latencyMs - Self.lowerStepMs)
          lowSince = now
        }
      } else {
        lowSince = now
      }
    } else {
      lowSince = nil
    }
    latencyMs = max(Self.minimumMs, latencyMs)
    return latencyMs == before ? nil : latencyMs
  }
}
