import DialtoneProtocol
import Testing

@testable import DialtoneGStreamer

@Suite struct AudioFilePlaybackTests {
  @Test func laterConnectionsContinueWhereTheFileIs() {
    let playback = AudioFilePlayback()
    let second: UInt64 = 1_000_000_000
    #expect(playback.position(startingAt: 50 * second) == 0)
    // An ICE restart 12 s later: its fresh connection starts 12 s into the file.
    #expect(playback.position(startingAt: 62 * second) == 12 * second)
    #expect(playback.position(startingAt: 49 * second) == 0)
  }

  @Test func everyConnectionOfOneMediaSharesItsPlayback() {
    let media = GStreamerMedia(audio: .wavFile(path: "/speech.wav"))
    var copy = media
    copy.relayOnly = true
    #expect(media.filePlayback === copy.filePlayback)
    #expect(media.receiving(from: .init(userId: "u", deviceId: "d")).filePlayback === media.filePlayback)
  }
}
