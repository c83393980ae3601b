/// What the network did to the received audio, from the RTP sequence numbers of the packets
/// that arrived themselves (RED's copies of them do not count): the loss before any repair, as
/// a browser's `packetsLost` counts it, and how bursty it was.
///
/// A sequence number is settled `reorderWindow` packets after the highest one seen: a packet
/// still missing then is lost, and consecutive losses make one burst. G.107's burst ratio is the
/// mean burst length over the one random loss of that rate would give, 1 / (1 − p).
struct AudioReceiveLoss: Sendable, Equatable {
  static let reorderWindow: Int64 = 64
  private static let ring: Int64 = 1024

  private var current = Span()
  /// Spans before a jump in the sequence numbers (the sender restarted its numbering).
  private var before = Span()
  private var highest: Int64 = 0
  private var arrived = [Bool](repeating: false, count: Int(ring))
  /// Sequence numbers below this are settled.
  private var settledTo: Int64 = 0
  private var run: Int64 = 0
  private var bursts: Int64 = 0
  private var burstLoss: Int64 = 0
  private var settled: Int64 = 0

  private struct Span: Sendable, Equatable {
    var first: Int64?
    var expected: Int64 = 0
    var received: Int64 = 0
  }

  init() {}

  /// Packets the sender sent from the first received to the highest, as far as can be told.
  var expected: Int64 { before.expected + current.expected }
  var received: Int64 { before.received + current.received }
  /// Packets the network lost (never arrived, as themselves).
  var lost: Int64 { max(0, expected - received) }

  /// G.107's BurstR of the losses settled so far: 1 for random loss, more for bursts; nil
  /// before any loss settled.
  var burstRatio: Double? {
    guard bursts > 0, settled > 0 else { return nil }
    let lossRate = min(0.99, Double(burstLoss) / Double(settled))
    let meanBurst = Double(burstLoss) / Double(bursts)
    return max(1, meanBurst * (1 - lossRate))
  }

  mutating func packet(sequence: UInt16) {
    guard let first = current.first else {
      start(at: Int64(sequence))
      return
    }
    // The extended number nearest to the highest seen (16-bit numbers wrap every 21 minutes).
    let step = Int64(Int16(bitPattern: sequence &- UInt16(truncatingIfNeeded: highest)))
    let number = highest + step
    if step > Self.ring - Self.reorderWindow {
      // Too far ahead to be this stream's next packets: the sender restarted its numbering.
      restart(at: number)
    } else if number > highest {
      for n in (highest + 1)...number { arrived[Self.slot(n)] = false }
      settle(upTo: number - Self.reorderWindow)
      highest = number
      arrived[Self.slot(number)] = true
      current.received += 1
      current.expected = highest - first + 1
    } else if number < first {
      // Older than the first packet: a jump back (a restart), or a stray from before the start.
      if step < -Self.reorderWindow { restart(at: number) }
    } else if number > highest - Self.ring, !arrived[Self.slot(number)] {
      arrived[Self.slot(number)] = true
      current.received += 1
    }
  }

  private mutating func start(at number: Int64) {
    current = Span(first: number, expected: 1, received: 1)
    highest = number
    settledTo = number
    run = 0
    for i in arrived.indices { arrived[i] = false }
    arrived[Self.slot(number)] = true
  }

  private mutating func restart(at number: Int64) {
    settle(upTo: highest + 1)
    before.expected += current.expected
    before.received += current.received
    start(at: number)
  }

  /// Settles every sequence number below `limit`.
  private mutating func settle(upTo limit: Int64) {
    while settledTo < limit {
      if arrived[Self.slot(settledTo)] {
        if run > 0 {
          bursts += 1
          burstLoss += run
          run = 0
        }
      } else {
        run += 1
      }
      settledTo += 1
      settled += 1
    }
  }

  private static func slot(_ number: Int64) -> Int { Int(((number % ring) + ring) % ring) }
}
