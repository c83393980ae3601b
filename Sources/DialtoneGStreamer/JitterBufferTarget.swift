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
/// `headroom`; packets the buffer still had to throw away as too late add a step on top.
///
/// While RED repairs packets (a recovered copy arrived in the last `redundancyHold`), the target
/// also covers the 90th percentile of the copies' lateness: a copy rides `distance` packets
/// behind its original (40 ms at distance 2), and a buffer that waits less declares the packet
/// lost just before its repair arrives. Under bursty loss copies are few (a 2 s window's 98th
/// percentile misses them), so they are counted on their own; a copy whose original arrived after
/// all (reordering) repaired nothing and is not. That costs the call about 45 ms of latency
/// while loss lasts, against 20–40 ms on a clean path.
///
/// A second copy of a packet (under reordering RED's copy can arrive before its original) is not
/// late: rtpjitterbuffer counts a copy of a packet it already played as `num-late`, so the copies
/// seen here are taken off what it counts (`tick(now:counts:)`); otherwise every reordered
/// original would raise the latency a step, up to the maximum.
///
/// The latency rises to the target at once and comes down only after the target stayed at least
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
  /// How long RED's copies keep the latency up after the last one came.
  static let redundancyHold: Duration = .seconds(10)
  /// At most this many arrivals are kept (50 packets a second for the window, and RED's).
  static let capacity = 250
  static let clockRate = 48_000.0

  private(set) var latencyMs = startMs
  private struct Arrival: Sendable, Equatable {
    var sequence: UInt16 = 0
    var at: Duration
    /// Arrival time less the RTP time, ms (a constant apart from the transit time).
    var transit: Double
  }
  private var arrivals: [Arrival] = []
  /// Copies RED recovered, over `redundancyHold`: their lateness is the repair's span.
  private var recovered: [Arrival] = []
  /// The sequence numbers seen lately, by their low bits (-1: none), to tell a copy of a packet
  /// from a packet.
  private var seen = [Int32](repeating: -1, count: 1024)
  /// Second copies of a packet that reached the buffer so far.
  private var copies: UInt64 = 0
  /// Packets that came after their time, so far (second copies not counted).
  private(set) var lateSoFar: UInt64 = 0
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

  /// A packet (`sequence`, `rtpTimestamp`) reached the buffer at `at` (any monotonic origin);
  /// `recovered`: RED's copy of it, unwrapped from a later packet.
  mutating func arrival(sequence: UInt16, rtpTimestamp: UInt32, at: Duration, recovered copy: Bool = false) {
    let slot = Int(sequence) % seen.count
    if seen[slot] == Int32(sequence) {
      copies += 1
      // The original after its copy (reordering): that copy repaired nothing.
      if !copy { recovered.removeAll { $0.sequence == sequence } }
    }
    seen[slot] = Int32(sequence)
    if let last = lastTimestamp {
      let step = Int64(Int32(bitPattern: rtpTimestamp &- last))
      timestampBase += step
    }
    lastTimestamp = rtpTimestamp
    if firstArrival == nil { firstArrival = at }
    if let first = firstArrival, at - first < Self.settle { return }
    let seconds = Double(at.components.seconds) + Double(at.components.attoseconds) / 1e18
    let arrival = Arrival(
      sequence: sequence, at: at, transit: seconds * 1000 - Double(timestampBase) / Self.clockRate * 1000)
    arrivals.append(arrival)
    if arrivals.count > Self.capacity { arrivals.removeFirst(arrivals.count - Self.capacity) }
    if copy {
      recovered.append(arrival)
      if recovered.count > Self.capacity { recovered.removeFirst(recovered.count - Self.capacity) }
    }
  }

  /// What the buffer counted so far (its `stats`): packets it threw away because it had played
  /// their place already, and copies of packets it still held.
  struct BufferCounts: Sendable, Equatable {
    var late: UInt64
    var duplicates: UInt64
  }

  /// Re-evaluates the latency at `now` from the buffer's running counts: what it discarded,
  /// less the second copies seen here, is what came too late. Returns the new latency when it
  /// changed.
  mutating func tick(now: Duration, counts: BufferCounts) -> Int? {
    // The copies are counted here before the buffer sees them, so the difference never runs
    // ahead of the truth; a dip (the buffer has not yet counted a copy) is not repaid later.
    let discarded = counts.late &+ counts.duplicates
    let late = discarded > copies ? discarded - copies : 0
    let fresh = late > lateSoFar ? Int(min(late - lateSoFar, UInt64(Int.max))) : 0
    lateSoFar = max(lateSoFar, late)
    return tick(now: now, lateArrivals: fresh)
  }

  /// The lateness of the window's packets, ms, sorted.
  private var lateness: [Double] {
    guard let fastest = arrivals.map(\.transit).min() else { return [] }
    return arrivals.map { $0.transit - fastest }.sorted()
  }

  private static func percentile(_ p: Double, of sorted: [Double]) -> Double {
    sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.down)))]
  }

  /// Re-evaluates the latency at `now`; `lateArrivals` is how many packets the buffer dropped
  /// as too late since the last tick. Returns the new latency when it changed.
  mutating func tick(now: Duration, lateArrivals: Int) -> Int? {
    guard fixedMs == nil else { return nil }
    arrivals.removeAll { now - $0.at > Self.window }
    var wanted = Double(Self.minimumMs)
    recovered.removeAll { now - $0.at > Self.redundancyHold }
    let sorted = lateness
    if !sorted.isEmpty {
      wanted = max(wanted, Self.percentile(0.98, of: sorted) + Self.headroomMs)
    }
    if let fastest = arrivals.map(\.transit).min(), !recovered.isEmpty {
      let span = recovered.map { max(0, $0.transit - fastest) }.sorted()
      wanted = max(wanted, Self.percentile(0.9, of: span) + Self.headroomMs)
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
