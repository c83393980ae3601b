/// What a loudspeaker plays of the decoded audio, modelled for a recorder that keeps time: a
/// device that, once started, plays one sample per sample period whether or not audio is
/// there, fed by a queue of decoded audio.
///
/// - It starts `delay` after the first chunk arrived (the playout delay: the jitter buffer's
///   latency and the decoder's look-ahead), so the queue then holds about `delay` of audio.
/// - A chunk that arrives after the queue ran dry was not there in time: the device played
///   silence meanwhile (an underrun), and the recording holds that silence. A stall therefore
///   stays in the recording as long as it lasted instead of being closed up. The device then
///   waits until the queue holds `delay` again (as NetEQ does after a pause): a talk spurt
///   after a pause (DTX) starts with the queue it needs.
/// - When the target delay rises, the device waits that much more (silence); when the queue
///   holds more than the target and `slack` beyond it (a burst after a stall, or the delay came
///   down), the arriving chunk is skipped down to the target, as a player catches up.
///
/// Times are nanoseconds of one monotonic clock (GStreamer's system clock), so the chunks of
/// one call's fresh connections (an ICE restart) share the device.
public struct PlayoutTimeline: Sendable, Equatable {
  public let sampleRate: Int
  /// Queued audio beyond the target that is skipped rather than played late.
  public static let slackMs = 20
  /// The clock time of the recording's first sample.
  public private(set) var start: UInt64?
  /// Samples in the recording so far: played, or queued to play.
  public private(set) var written = 0
  /// The delay the queue aims at, samples.
  private var target = 0

  /// What to append for one chunk: `silence` zero samples, then the chunk's samples `kept`.
  public struct Placement: Sendable, Equatable {
    public var silence: Int
    public var kept: Range<Int>
  }

  public init(sampleRate: Int = 48_000) {
    self.sampleRate = sampleRate
  }

  /// A chunk of `count` samples arriving at `arrived`, with the playout delay wanted now.
  public mutating func place(count: Int, arrived: UInt64, delay: UInt64) -> Placement {
    guard count > 0 else { return Placement(silence: 0, kept: 0..<0) }
    let wanted = samples(delay)
    guard let start else {
      self.start = arrived &+ delay
      target = wanted
      written = count
      return Placement(silence: 0, kept: 0..<count)
    }
    // Where the device is now (negative before it started).
    let playing = arrived >= start ? samples(arrived - start) : -samples(start - arrived)
    // The queue ran dry (silence, DTX, a stall): the device played silence until now, and
    // waits for the queue to hold the delay again, as it did at the start. In a pause that is
    // inaudible; without it, every talk spurt after a pause would play with an empty queue.
    var silence = playing > written ? playing - written + wanted : 0
    // A longer delay: the device waits for it.
    if wanted > target { silence += wanted - target }
    target = wanted
    let queued = written + silence - max(0, playing)
    // Beyond the slack, back down to the target at once (not a sample at a time at the edge:
    // each skip is a click).
    let excess = queued + count - target
    let skip = excess > samples(UInt64(Self.slackMs) * 1_000_000) ? min(count, excess) : 0
    written += silence + count - skip
    return Placement(silence: silence, kept: skip..<count)
  }

  /// The silence that ends the recording at `now` (the call ended): what played after the
  /// last audio.
  public mutating func finish(at now: UInt64) -> Int {
    guard let start, now > start else { return 0 }
    let end = samples(now - start)
    defer { written = max(written, end) }
    return max(0, end - written)
  }

  private func samples(_ ns: UInt64) -> Int {
    Int((Double(ns) * Double(sampleRate) / 1e9).rounded())
  }
}
