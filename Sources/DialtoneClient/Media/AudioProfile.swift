/// How a Dialtone device wants its call audio: what it writes into its own descriptions (what it
/// asks the other side's Opus encoder for, RFC 7587) and what its own encoder does when the other
/// side's description allows it. The GStreamer engine (the CLI) applies it through `AudioSDP`.
/// Browsers (the web page) and libwebrtc (the Apple adapter) already write and follow the same
/// by default: in-band FEC, no DTX, 20 ms, RED offered; a Dialtone description puts RED first,
/// so they send RED towards it.
///
/// The defaults: in-band FEC, no DTX, 20 ms packets at up to 32 kbit/s, and RED (RFC 2198)
/// where both sides offer it.
public struct AudioProfile: Sendable, Equatable {
  /// Opus in-band FEC (`useinbandfec=1`): each packet carries a coarse copy of the one before,
  /// decoded when that one was lost. The encoder spends bits on it only as the loss it is told
  /// grows.
  public var inbandFEC: Bool
  /// Discontinuous transmission (`usedtx=1`): in silence the encoder sends a comfort-noise
  /// update every 400 ms instead of 50 packets a second.
  public var dtx: Bool
  /// The packet time (`a=ptime`) and the encoder's frame size, in ms: 10, 20, 40 or 60.
  public var packetTimeMs: Int
  /// The highest average bitrate asked of the other side's encoder (`maxaveragebitrate`), and
  /// what this side's encoder aims at, bits per second (6,000–510,000, RFC 7587).
  public var maxAverageBitrate: Int
  /// RED (RFC 2198, `red/48000/2`) ahead of Opus when both sides offer it: each packet repeats
  /// an earlier frame whole, so a lost packet is replaced at full quality.
  public var redundancy: Bool
  /// How far back the frame RED repeats lies, in packets (1: the previous one). Opus FEC already
  /// covers the previous packet, so 2 makes the two cover a burst of two lost packets between them.
  public var redundancyDistance: Int

  public init(
    inbandFEC: Bool = true, dtx: Bool = false, packetTimeMs: Int = 20, maxAverageBitrate: Int = 32_000,
    redundancy: Bool = true, redundancyDistance: Int = 2
  ) {
    self.inbandFEC = inbandFEC
    self.dtx = dtx
    self.packetTimeMs = packetTimeMs
    self.maxAverageBitrate = maxAverageBitrate
    self.redundancy = redundancy
    self.redundancyDistance = redundancyDistance
  }

  /// Dialtone's audio on every engine.
  public static let standard = AudioProfile()

  /// The frame sizes Opus encoders take, in ms.
  public static let packetTimes = [10, 20, 40, 60]
  /// RFC 7587's range for `maxaveragebitrate`.
  public static let bitrates = 6_000...510_000

  /// The packet time the encoder can use nearest to `ms` (RFC 7587: 2.5 to 120 ms; encoders take
  /// these four), rounding down between two.
  public static func packetTime(nearest ms: Int) -> Int {
    packetTimes.last { $0 <= ms } ?? packetTimes[0]
  }
}
