import Testing

@testable import DialtoneGStreamer

struct VideoResolutionLadderTests {
  typealias Size = VideoResolutionLadder.Size

  private func changes(_ ladder: inout VideoResolutionLadder, _ target: Int, _ congestionSeen: Bool) -> Bool {
    ladder.update(target: target, congestionSeen: congestionSeen)
  }

  @Test func theSizesAreFractionsOfTheCameraNoneNarrowerThan160() {
    #expect(
      VideoResolutionLadder(width: 640, height: 360, framerate: 30).sizes == [
        Size(width: 640, height: 360), Size(width: 480, height: 270), Size(width: 320, height: 180),
        Size(width: 160, height: 90),
      ])
    #expect(VideoResolutionLadder(width: 320, height: 240, framerate: 15).sizes.map(\.width) == [320, 240, 160])
    #expect(VideoResolutionLadder(width: 100, height: 100, framerate: 15).sizes == [Size(width: 100, height: 100)])
  }

  // Until the first congestion a low target keeps the full size (a call starts at 300 kbit/s).
  @Test func aCleanLinkNeverChangesTheSize() {
    var ladder = VideoResolutionLadder(width: 640, height: 360, framerate: 30)
    for target in [300_000, 100_000, 1_500_000] {
      #expect(!changes(&ladder, target, false))
      #expect(ladder.step == 0)
    }
  }

  // 640x360 at 30 fps keeps its size down to 415 kbit/s (0.06 bit per pixel), 480x270 down to
  // 233, 320x180 down to 104; climbing back needs 0.08: 553, 311 and 138 kbit/s.
  @Test func theSizeFollowsTheTargetWithHysteresis() {
    var ladder = VideoResolutionLadder(width: 640, height: 360, framerate: 30)
    #expect(!changes(&ladder, 450_000, true))
    #expect(changes(&ladder, 400_000, true))
    #expect(ladder.size == Size(width: 480, height: 270))
    #expect(!changes(&ladder, 500_000, true))  // not yet 553
    #expect(changes(&ladder, 560_000, true))
    #expect(ladder.size.width == 640)
    #expect(changes(&ladder, 150_000, true))  // two steps at once
    #expect(ladder.size == Size(width: 320, height: 180))
    #expect(!changes(&ladder, 130_000, true))
    #expect(changes(&ladder, 320_000, true))  // one step up at a time
    #expect(ladder.size.width == 480)
    #expect(changes(&ladder, 90_000, true))
    #expect(ladder.size == Size(width: 160, height: 90))
    #expect(!changes(&ladder, 10_000, true))  // the last step holds
  }
}
