/// The camera's picture size under the sender's bitrate target, as browsers degrade video on a
/// narrow link: fewer pixels rather than a picture the encoder cannot fill (at 300 kbit/s a
/// 640x360 keyframe alone is bigger than a bottleneck's queue, and its loss freezes the
/// receiver until the next one).
///
/// One of full, ¾, ½ and ¼ size (each side, none narrower than 160 px).
///
/// The first picture is the largest size that gets `keep` bits per pixel per frame at the start
/// bitrate: a call starts at 300 kbit/s, where a 640x360 camera starts at 480x270 (as
/// libwebrtc's start limits have it; at full size the first keyframes of a busy picture were
/// lost in a 300 kbit/s link's queue for 5 s). Until the first congestion the size only climbs:
/// once the target would give the bigger size `climb` bits per pixel, or at once while the
/// encoder leaves most of its target unused (an easy picture, which a small size would only
/// blur). After it, the size is the largest that keeps `keep`, and a bigger one comes back
/// only at `climb`, so a target near a boundary does not flip the size: each change costs a
/// keyframe. A pure value.
public struct VideoResolutionLadder: Sendable, Equatable {
  public struct Size: Sendable, Equatable {
    public var width: Int
    public var height: Int
  }

  /// Bits per pixel per frame a size needs to stay, and to be climbed back to.
  static let keep = 0.06
  static let climb = 0.08

  public let sizes: [Size]
  public let framerate: Int
  /// Index into `sizes`: 0 is the configured size.
  public private(set) var step = 0

  /// `start`: the encoder's first target, which sizes the first picture.
  public init(width: Int, height: Int, framerate: Int, start: Int) {
    self.framerate = max(framerate, 1)
    var sizes: [Size] = []
    for (numerator, denominator) in [(1, 1), (3, 4), (1, 2), (1, 4)] {
      // Even sides: the encoders take 4:2:0.
      let size = Size(
        width: width * numerator / denominator / 2 * 2, height: height * numerator / denominator / 2 * 2)
      if sizes.isEmpty || (size.width >= 160 && size.height >= 2) { sizes.append(size) }
    }
    self.sizes = sizes
    while step + 1 < sizes.count, bitsPerPixel(start, sizes[step]) < Self.keep { step += 1 }
  }

  public var size: Size { sizes[step] }

  /// The size for a new target; true when it changed. `sent`: the bitrate the sender used
  /// over the last step (nil: unknown).
  public mutating func update(target: Int, sent: Double?, congestionSeen: Bool) -> Bool {
    let before = step
    if congestionSeen {
      while step + 1 < sizes.count, bitsPerPixel(target, sizes[step]) < Self.keep { step += 1 }
    }
    if step == before, step > 0 {
      let easy = !congestionSeen && (sent.map { $0 < 0.5 * Double(target) } ?? false)
      if easy || bitsPerPixel(target, sizes[step - 1]) >= Self.climb { step -= 1 }
    }
    return step != before
  }

  private func bitsPerPixel(_ target: Int, _ size: Size) -> Double {
    Double(target) / Double(max(size.width * size.height * framerate, 1))
  }
}
