import DialtoneGStreamer
import DialtoneProtocol

/// The remote video of a group call, per participant: a participant who left and came back
/// had several streams, reported as one.
enum ParticipantVideo {
  /// Each participant's video, in the order they first appeared.
  static func byParticipant(_ streams: [(from: Peer, video: GStreamerPeerConnection.ReceivedVideo)]) -> [(
    userId: String, video: GStreamerPeerConnection.ReceivedVideo
  )] {
    var order: [String] = []
    var parts: [String: [GStreamerPeerConnection.ReceivedVideo]] = [:]
    for stream in streams {
      if parts[stream.from.userId] == nil { order.append(stream.from.userId) }
      parts[stream.from.userId, default: []].append(stream.video)
    }
    return order.map { ($0, GStreamerPeerConnection.ReceivedVideo.merged(parts[$0] ?? [])) }
  }
}
