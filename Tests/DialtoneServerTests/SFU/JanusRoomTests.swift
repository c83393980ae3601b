import DialtoneJSON
import Testing

@testable import DialtoneSFU
@testable import DialtoneServer

/// The VideoRoom room a group call gets on Janus.
@Suite struct JanusRoomTests {
  @Test func aVideoCallsRoomIsVP8WithABitrateCapAndAnAudioCallsHasNone() {
    let video = JanusSFU.createRequest(room: 42, secret: "s", pin: "p", video: true, adminKey: "k")
    #expect(video["request"]?.stringValue == "create")
    #expect(video["videocodec"]?.stringValue == "vp8")
    #expect(video["audiocodec"]?.stringValue == "opus")
    #expect(video["bitrate"]?.intValue == JanusSFU.videoBitrate)
    #expect(video["admin_key"]?.stringValue == "k")
    #expect(video["pin"]?.stringValue == "p" && video["is_private"]?.boolValue == true)
    // The placeholder of single subscriber connections: an Opus dummy publisher, room for it.
    #expect(video["dummy_publisher"]?.boolValue == true)
    #expect(video["dummy_streams"]?.arrayValue?.compactMap { $0["codec"]?.stringValue } == ["opus"])
    #expect(video["publishers"]?.intValue == 65)

    let audio = JanusSFU.createRequest(room: 42, secret: "s", pin: "p", video: false, adminKey: nil)
    #expect(audio["bitrate"] == nil && audio["admin_key"] == nil)
    #expect(audio["room"]?.intValue == 42)
  }

  /// A departing device is kicked with the room's secret (Janus requires it for `kick`).
  @Test func aDepartingDeviceIsKickedByFeedWithTheRoomsSecret() {
    let kick = JanusSFU.kickRequest(room: 42, secret: "s", feed: 7)
    #expect(kick["request"]?.stringValue == "kick")
    #expect(kick["room"]?.intValue == 42 && kick["id"]?.intValue == 7 && kick["secret"]?.stringValue == "s")
  }
}
