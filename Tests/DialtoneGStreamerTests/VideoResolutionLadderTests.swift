import Testing

@testable import DialtoneGStreamer

struct VideoResolutionLadderTests {
  typealias Size = VideoResolutionLadder.Size

  private func changes(
    _ ladder: inout VideoResolutionLadder, _ target: Int, sent: Double? = nil, congestionSeen: Bool = true
  ) -> Bool {
    ladder.update(target: target, sent: sent, congestionSeen: congestionSeen)
  }

  private func ladder(_ width: Int, _ height: Int, _ framerate: Int, start: Int = 1_500_000) -> VideoResolutionLadder {
    VideoResolutionLadder(width: width, height: height, framerate: framerate, start: start)
  }

  @Test func theSizesAreFractionsOfTheCameraNoneNarrowerThan160() {
    #expect(
      ladder(640, 360, 30).sizes == [
        Size(width: 640, height: 360), Size(width: 480, height: 270), Size(width: 320, height: 180),
        Size(width: 160, height: 90),
      ])
    #expect(ladder(320, 240, 15).sizes.map(\.width) == [320, 240, 160])
    #expect(ladder(100, 100, 15).sizes == [Size(width: 100, height: 100)])
  }

  // A call starts at 300 kbit/s: a 640x360 camera at 30 fps starts at 480x270 (0.077 bit per
  // pixel), a 320x240 one at 15 fps at full size; a clean link climbs once, at 553 kbit/s.
  @Test func theFirstPictureIsSizedForTheStartBitrate() {
    var call = ladder(640, 360, 30, start: 300_000)
    #expect(call.size == Size(width: 480, height: 270))
    #expect(ladder(320, 240, 15, start: 300_000).step == 0)
    #expect(ladder(640, 360, 30, start: 100_000).size == Size(width: 160, height: 90))
    for target in [375_000, 469_000] { #expect(!changes(&call, target, sent: 400_000, congestionSeen: false)) }
    #expect(changes(&call, 586_000, sent: 500_000, congestionSeen: false))
    #expect(call.step == 0)
    // Before any congestion a low target never lowers the size.
    for target in [100_000, 1_500_000] { #expect(!changes(&call, target, sent: 400_000, congestionSeen: false)) }
  }

  // A picture that needs a fraction of its target (a still scene) gets the full size at once
  // on a clean link, and keeps it; once the link was congested, only the target counts.
  @Test func anEasyPictureClimbsUntilTheFirstCongestion() {
    var call = ladder(640, 360, 30, start: 300_000)
    #expect(changes(&call, 375_000, sent: 70_000, congestionSeen: false))
    #expect(call.step == 0)
    var congested = ladder(640, 360, 30, start: 300_000)
    #expect(changes(&congested, 200_000, sent: 150_000))
    #expect(congested.size.width == 320)
    #expect(!changes(&congested, 250_000, sent: 40_000))
  }

  // 640x360 at 30 fps keeps its size down to 415 kbit/s (0.06 bit per pixel), 480x270 down to
  // 233, 320x180 down to 104; climbing back needs 0.08: 553, 311 and 138 kbit/s.
  @Test func theSizeFollowsTheTargetWithHysteresis() {
    var ladder = ladder(640, 360, 30)
    #expect(!changes(&ladder, 450_000))
    #expect(changes(&ladder, 400_000))
    #expect(ladder.size == Size(width: 480, height: 270))
    #expect(!changes(&ladder, 500_000))  // not yet 553
    #expect(changes(&ladder, 560_000))
    #expect(ladder.size.width == 640)
    #expect(changes(&ladder, 150_000))  // two steps at once
    #expect(ladder.size == Size(width: 320, height: 180))
    #expect(!changes(&ladder, 130_000))
    #expect(changes(&ladder, 320_000))  // one step up at a time
    #expect(ladder.size.width == 480)
    #expect(changes(&ladder, 90_000))
    #expect(ladder.size == Size(width: 160, height: 90))
    #expect(!changes(&ladder, 10_000))  // the last step holds
  }
}
