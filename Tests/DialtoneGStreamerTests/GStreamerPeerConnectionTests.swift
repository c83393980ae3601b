import DialtoneClient
import DialtoneProtocol
import DialtoneSupport
import Foundation
import Testing

@testable import DialtoneGStreamer

/// Collects PCM from the remote-audio callback.
final class PCMCollector: Sendable {
  private let data = Locked(Data())
  func append(_ chunk: Data) { data.withLock { $0.append(chunk) } }
  var samples: [Int16] {
    data.withLock { data in
      data.withUnsafeBytes { raw in Array(raw.bindMemory(to: Int16.self)) }
    }
  }
}

/// The dominant frequency of 16-bit PCM: a coarse Goertzel scan (5 Hz steps over a 0.1 s
/// window, whose main lobe is ±10 Hz wide), then 1 Hz steps over the last second.
func dominantFrequency(_ samples: [Int16], rate: Double = 48_000) -> Double {
  func power(_ f: Double, _ window: ArraySlice<Int16>) -> Double {
    let k = 2 * cos(2 * Double.pi * f / rate)
    var s1 = 0.0
    var s2 = 0.0
    for x in window {
      let s = Double(x) + k * s1 - s2
      s2 = s1
      s1 = s
    }
    return s1 * s1 + s2 * s2 - k * s1 * s2
  }
  let long = samples.suffix(48_000)
  let short = samples.suffix(4_800)
  var best = (f: 0.0, p: -1.0)
  for f in stride(from: 100.0, through: 2000.0, by: 5) {
    let p = power(f, short)
    if p > best.p { best = (f, p) }
  }
  var fine = (f: best.f, p: -1.0)
  for f in stride(from: best.f - 10, through: best.f + 10, by: 1) {
    let p = power(f, long)
    if p > fine.p { fine = (f, p) }
  }
  return fine.f
}

@Suite(.serialized) struct GStreamerPeerConnectionTests {
  /// Pumps one side's local candidates into the other.
  private func trickle(_ from: GStreamerPeerConnection, to: GStreamerPeerConnection) -> Task<Void, Never> {
    Task {
      for await candidate in from.localCandidates {
        guard let candidate else { continue }
        try? await to.addRemoteCandidate(candidate)
      }
    }
  }

  private func waitFor(
    _ milestone: GStreamerPeerConnection.Milestone, on pc: GStreamerPeerConnection, _ seen: MilestoneLog
  ) async -> Bool {
    let deadline = Date().addingTimeInterval(15)
    while Date() < deadline {
      if seen.contains(milestone, pc) { return true }
      try? await Task.sleep(for: .milliseconds(20))
    }
    return false
  }

  @Test func twoConnectionsOnLoopbackCarryToneAndDataBothWays() async throws {
    let pcmAtB = PCMCollector()
    let factoryA = GStreamerPeerConnectionFactory(media: GStreamerMedia(audio: .tone(frequency: 523)))
    let factoryB = GStreamerPeerConnectionFactory(
      media: GStreamerMedia(audio: .tone(frequency: 330)) { pcmAtB.append($0.samples) })
    let config = PeerConnectionConfiguration(iceServers: [], video: false, dataChannel: true)
    let a = try #require(try await factoryA.makePeerConnection(config) as? GStreamerPeerConnection)
    let b = try #require(try await factoryB.makePeerConnection(config) as? GStreamerPeerConnection)
    #expect(a.canRestartIce == false)
    let log = MilestoneLog()
    log.follow(a)
    log.follow(b)
    let ab = trickle(a, to: b)
    let ba = trickle(b, to: a)
    var statesA = a.connectionStates.makeAsyncIterator()

    let offer = try await a.createOffer(iceRestart: false)
    #expect(offer.sdp.contains("m=audio"))
    #expect(offer.sdp.contains("m=application"))
    try await a.setLocalDescription(offer, kind: .offer)
    try await b.setRemoteDescription(offer, kind: .offer)
    let answer = try await b.createAnswer()
    try await b.setLocalDescription(answer, kind: .answer)
    try await a.setRemoteDescription(answer, kind: .answer)
    // Dialtone's audio rules on both descriptions (AudioSDP): RED first, Opus FEC asked for.
    for description in [offer, answer] {
      #expect(description.sdp.contains("m=audio 9 UDP/TLS/RTP/SAVPF 96 111"), "\(description.sdp)")
      #expect(description.sdp.contains("useinbandfec=1;usedtx=0;maxaveragebitrate=32000"))
      #expect(!description.sdp.contains("ulpfec"))
    }
    #expect(
      a.audioSendParameters
        == AudioSendParameters(
          opusPayloadType: 111, inbandFEC: true, dtx: false, bitrate: 32_000, packetTimeMs: 20,
          redundancyPayloadType: 96))

    var connected = false
    while let s = await statesA.next() {
      if s == .connected {
        connected = true
        break
      }
      if s == .failed { break }
    }
    #expect(connected)
    #expect(await waitFor(.iceConnected, on: a, log))
    #expect(await waitFor(.dataChannelOpen, on: a, log))
    #expect(await waitFor(.dataChannelOpen, on: b, log))
    #expect(await waitFor(.firstAudio, on: b, log))
    // Both send RED once the transport runs (webrtcbin's RED encoder exists only then).
    var red = false
    for _ in 0..<100 where !red {
      red = a.sendsRedundancy && b.sendsRedundancy
      if !red { try? await Task.sleep(for: .milliseconds(50)) }
    }
    #expect(red)

    var inboxB = b.dataChannelMessages.makeAsyncIterator()
    var inboxA = a.dataChannelMessages.makeAsyncIterator()
    try await a.sendData(Data("hello from a".utf8))
    try await b.sendData(Data("hello from b".utf8))
    #expect(await inboxB.next() == Data("hello from a".utf8))
    #expect(await inboxA.next() == Data("hello from b".utf8))

    // A second of audio, then the tone must be A's 523 Hz.
    try await Task.sleep(for: .milliseconds(1500))
    let frequency = dominantFrequency(pcmAtB.samples)
    #expect(abs(frequency - 523) <= 5, "heard \(frequency) Hz")
    let stats = await a.stats()
    #expect(stats.bytesSent > 0)
    #expect(stats.packetsSent > 0)

    await a.close()
    await b.close()
    await a.close()  // idempotent
    ab.cancel()
    ba.cancel()
    await #expect(throws: GStreamerError.self) { try await a.createOffer(iceRestart: false) }
  }

  /// Waits (bounded) until `pc` has decoded `count` more frames than it had.
  private func framesArrive(on pc: GStreamerPeerConnection, count: Int = 10) async -> Bool {
    let start = pc.videoReceived().frames
    let deadline = Date().addingTimeInterval(15)
    while Date() < deadline {
      if pc.videoReceived().frames >= start + count { return true }
      try? await Task.sleep(for: .milliseconds(50))
    }
    return false
  }

  /// One negotiation of a fresh pair, as `CallEngine` runs it, with each side's video direction.
  private func negotiate(
    _ offerer: GStreamerPeerConnection, _ offererVideo: MediaDirection, _ answerer: GStreamerPeerConnection,
    _ answererVideo: MediaDirection
  ) async throws -> (offer: SessionDescription, answer: SessionDescription) {
    await offerer.setVideoDirection(offererVideo)
    let offer = try await offerer.createOffer(iceRestart: false)
    try await offerer.setLocalDescription(offer, kind: .offer)
    try await answerer.setRemoteDescription(offer, kind: .offer)
    await answerer.setVideoDirection(answererVideo)
    let answer = try await answerer.createAnswer()
    try await answerer.setLocalDescription(answer, kind: .answer)
    try await offerer.setRemoteDescription(answer, kind: .answer)
    return (offer, answer)
  }

  /// A connected pair with cameras (red at A, blue at B), negotiated with these directions.
  /// `codecs`: what each side prefers; `cameraA` false: A has no camera (it only receives).
  private func pair(
    _ aVideo: MediaDirection, _ bVideo: MediaDirection, codecs: (VideoCodec, VideoCodec) = (.vp8, .vp8),
    cameraA: Bool = true, held: Bool = false
  ) async throws -> (
    a: GStreamerPeerConnection, b: GStreamerPeerConnection, offer: String, answer: String, pumps: [Task<Void, Never>]
  ) {
    let red = GStreamerMedia.VideoSource(pattern: "red", width: 320, height: 180, framerate: 15)
    let blue = GStreamerMedia.VideoSource(pattern: "blue", width: 320, height: 180, framerate: 15)
    var mediaA = GStreamerMedia(audio: .tone(frequency: 523), video: cameraA ? red : nil)
    var mediaB = GStreamerMedia(audio: .tone(frequency: 330), video: blue)
    mediaA.videoCodec = codecs.0
    mediaB.videoCodec = codecs.1
    let factoryA = GStreamerPeerConnectionFactory(media: mediaA)
    let factoryB = GStreamerPeerConnectionFactory(media: mediaB)
    var config = PeerConnectionConfiguration(iceServers: [], video: true)
    config.mediaHeld = held
    let a = try #require(try await factoryA.makePeerConnection(config) as? GStreamerPeerConnection)
    let b = try #require(try await factoryB.makePeerConnection(config) as? GStreamerPeerConnection)
    let pumps = [trickle(a, to: b), trickle(b, to: a)]
    let (offer, answer) = try await negotiate(a, aVideo, b, bVideo)
    // The engine opens a camera once its side sends video.
    await a.setVideoEnabled(aVideo.sends)
    await b.setVideoEnabled(bVideo.sends)
    await factoryA.shutdown()
    await factoryB.shutdown()
    return (a, b, offer.sdp, answer.sdp, pumps)
  }

  // A pre-connected leg (protocol.md 11): ICE and DTLS come up with the media held at the
  // source, so not one audio or video packet leaves either side (no silence either) and
  // nothing is heard or seen; once released, both flow on the same connection.
  @Test func aHeldConnectionConnectsButSendsNoMediaUntilReleased() async throws {
    let held = try await pair(.sendrecv, .sendrecv, held: true)
    let log = MilestoneLog()
    log.follow(held.a)
    log.follow(held.b)
    #expect(await waitFor(.dtlsConnected, on: held.a, log))
    #expect(await waitFor(.dtlsConnected, on: held.b, log))
    try await Task.sleep(for: .seconds(1))
    for pc in [held.a, held.b] {
      let stats = await pc.stats()
      #expect(stats.packetsSent == 0 && (stats.video?.bytesSent ?? 0) == 0, "\(stats)")
      #expect(pc.videoReceived().frames == 0 && !log.contains(.firstAudio, pc))
    }
    await held.a.releaseMedia()
    await held.b.releaseMedia()
    #expect(await waitFor(.firstAudio, on: held.a, log))
    #expect(await waitFor(.firstAudio, on: held.b, log))
    #expect(await framesArrive(on: held.a))
    #expect(await framesArrive(on: held.b))
    #expect(held.b.videoReceived().red > 200)
    #expect(await held.a.stats().packetsSent > 0)
    for task in held.pumps { task.cancel() }
    await held.a.close()
    await held.b.close()
  }

  // An audio call's video section (recvonly offer, no camera on either side: inactive), an
  // upgrade's (sendrecv offer answered recvonly) and a video call's: frames of the sender's
  // colour arrive exactly where the directions say. (webrtcbin cannot change a negotiated
  // direction, so an upgrade is negotiated on fresh connections like these.)
  @Test func theVideoDirectionsDecideWhoSendsFrames() async throws {
    let audio = try await pair(.recvonly, .recvonly)
    #expect(MediaDirection.video(in: audio.offer) == .recvonly)
    #expect(MediaDirection.video(in: audio.answer) == .inactive)
    let log = MilestoneLog()
    log.follow(audio.b)
    #expect(await waitFor(.firstAudio, on: audio.b, log))
    try await Task.sleep(for: .milliseconds(500))
    #expect(audio.a.videoReceived().frames == 0 && audio.b.videoReceived().frames == 0)

    let upgraded = try await pair(.sendrecv, .recvonly)
    #expect(MediaDirection.video(in: upgraded.answer) == .recvonly)
    #expect(await framesArrive(on: upgraded.b))
    let seen = upgraded.b.videoReceived()
    #expect(seen.red > 200 && seen.blue < 60 && seen.width == 320, "B saw \(seen)")
    #expect(upgraded.a.videoReceived().frames == 0)

    let both = try await pair(.sendrecv, .sendrecv)
    #expect(MediaDirection.video(in: both.answer) == .sendrecv)
    #expect(both.offer.contains(" rtx/90000") && both.answer.contains(" rtx/90000"), "\(both.offer)")
    // Transport-wide congestion control offered and answered: the sender's feedback.
    #expect(VideoCodec.transportWideCCID(in: both.offer) == 3 && VideoCodec.transportWideCCID(in: both.answer) == 3)
    #expect(both.offer.contains(" transport-cc") && both.answer.contains(" transport-cc"), "\(both.answer)")
    #expect(await framesArrive(on: both.a))
    #expect(both.a.videoReceived().blue > 200)
    #expect(await framesArrive(on: both.b))
    // The video figures, told apart from the audio by SSRC.
    try await Task.sleep(for: .seconds(2))
    let stats = await both.a.stats()
    let video = try #require(stats.video)
    #expect(video.bytesSent > 0 && video.bytesReceived > 0 && video.framesDecoded > 0)
    #expect(video.bytesSent < stats.bytesSent && video.frameWidth == 320)
    #expect(video.targetBitrate >= 100_000)
    #expect(await audio.a.stats().video == nil)  // an audio call carried no video

    for made in [audio, upgraded, both] {
      await made.a.close()
      await made.b.close()
      for pump in made.pumps { pump.cancel() }
    }
  }

  // H.264 (OpenH264) both ways: an offer carries the offerer's codec, the answer takes it even
  // when the answerer prefers the other (its encoder is replaced before the answer), and a
  // side without a camera offers both and receives what the answerer prefers.
  @Test func h264IsNegotiatedSentAndDecoded() async throws {
    let h264 = try await pair(.sendrecv, .sendrecv, codecs: (.h264, .vp8))
    #expect(h264.offer.contains(" H264/90000") && !h264.offer.contains(" VP8/90000"), "\(h264.offer)")
    #expect(h264.answer.contains(" H264/90000") && h264.answer.contains("packetization-mode=1"), "\(h264.answer)")
    #expect(await framesArrive(on: h264.a))
    #expect(await framesArrive(on: h264.b))
    #expect(h264.a.videoReceived().blue > 200 && h264.a.videoReceived().width == 320)
    #expect(h264.b.videoReceived().red > 200)
    #expect(await h264.a.stats().video?.codec == "H264")
    #expect(await h264.b.stats().video?.codec == "H264")

    let vp8 = try await pair(.sendrecv, .sendrecv, codecs: (.vp8, .h264))
    #expect(vp8.answer.contains(" VP8/90000") && !vp8.answer.contains(" H264/90000"), "\(vp8.answer)")
    #expect(await framesArrive(on: vp8.a))
    #expect(vp8.a.videoReceived().blue > 200)
    #expect(await vp8.a.stats().video?.codec == "VP8")

    let receiving = try await pair(.recvonly, .sendrecv, codecs: (.vp8, .h264), cameraA: false)
    #expect(receiving.offer.contains(" VP8/90000") && receiving.offer.contains(" H264/90000"), "\(receiving.offer)")
    #expect(receiving.answer.contains(" H264/90000") && !receiving.answer.contains(" VP8/90000"))
    #expect(await framesArrive(on: receiving.a))
    #expect(receiving.a.videoReceived().blue > 200)
    #expect(await receiving.a.stats().video?.codec == "H264")

    for made in [h264, vp8, receiving] {
      await made.a.close()
      await made.b.close()
      for pump in made.pumps { pump.cancel() }
    }
  }

  @Test func anAnswerPicksItsCodecAmongTheOfferedOnes() {
    // Chromium's video section, cut down: VP8, then H.264 in baseline, constrained baseline
    // and main, each in packetization modes 1 and 0.
    let offer = """
      v=0\r
      m=audio 9 UDP/TLS/RTP/SAVPF 111\r
      a=rtpmap:111 opus/48000/2\r
      m=video 9 UDP/TLS/RTP/SAVPF 96 97 103 104 107 108 109 114\r
      a=rtpmap:96 VP8/90000\r
      a=rtpmap:97 rtx/90000\r
      a=fmtp:97 apt=96\r
      a=rtpmap:103 H264/90000\r
      a=fmtp:103 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f\r
      a=rtpmap:104 H264/90000\r
      a=fmtp:104 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=42001f\r
      a=rtpmap:107 H264/90000\r
      a=fmtp:107 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=42e01f\r
      a=rtpmap:108 H264/90000\r
      a=fmtp:108 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f\r
      a=rtpmap:109 H264/90000\r
      a=fmtp:109 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=4d001f\r

      """
    #expect(VideoCodec.choice(in: offer, preferring: .vp8)! == (.vp8, 96))
    #expect(VideoCodec.choice(in: offer, preferring: .h264)! == (.h264, 108))  // constrained, mode 1
    let mainOnly = offer.replacingOccurrences(of: "42e01f", with: "4d001e").replacingOccurrences(
      of: "42001f", with: "4d001e")
    #expect(VideoCodec.choice(in: mainOnly, preferring: .h264)! == (.vp8, 96))  // no baseline: VP8
    let vp8Gone = offer.replacingOccurrences(of: "VP8/90000", with: "VP9/90000")
    #expect(VideoCodec.choice(in: vp8Gone, preferring: .vp8)! == (.h264, 108))
    #expect(VideoCodec.choice(in: "v=0\r\nm=audio 9 RTP/AVP 0\r\n", preferring: .vp8) == nil)
    // webrtcbin's answer to an H.264 offer: no profile-level-id, RTX listed after.
    let answer =
      "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 102 96\r\na=rtpmap:102 H264/90000\r\n"
      + "a=fmtp:102 packetization-mode=1;level-asymmetry-allowed=1\r\na=rtpmap:96 rtx/90000\r\n"
    #expect(VideoCodec.answered(in: answer) == .h264)
    #expect(VideoCodec.answered(in: offer) == .vp8)
    #expect(VideoCodec.answered(in: "v=0\r\nm=audio 9 RTP/AVP 0\r\n") == nil)
    let section = SDPMediaSection.first("video", in: offer)
    #expect(section?.formatParameters(of: 108)["profile-level-id"] == "42e01f")
    #expect(section?.formatParameters(of: 96) == [:])
    #expect(section?.payloadTypes(of: "h264/90000") == [103, 104, 107, 108, 109])
  }

  // A group call's receive-only stream of one participant answers as the DTLS server
  // (`a=setup:passive`, as the single subscriber connection does; a 1:1 answer stays
  // `active`), and its DTLS and media come up with the offerer as the client.
  @Test(.timeLimit(.minutes(1))) func aParticipantsStreamAnswersAsTheDTLSServer() async throws {
    let pcm = PCMCollector()
    let factoryA = GStreamerPeerConnectionFactory(media: GStreamerMedia(audio: .tone(frequency: 440)))
    let factoryB = GStreamerPeerConnectionFactory(
      media: GStreamerMedia(audio: .silence) { pcm.append($0.samples) })
    let a = try #require(
      try await factoryA.makePeerConnection(PeerConnectionConfiguration(iceServers: [], video: false, sendOnly: true))
        as? GStreamerPeerConnection)
    let b = try #require(
      try await factoryB.makePeerConnection(
        PeerConnectionConfiguration(
          iceServers: [], video: false, remoteParticipant: Peer(userId: "alice", deviceId: "phone")))
        as? GStreamerPeerConnection)
    let log = MilestoneLog()
    log.follow(a)
    log.follow(b)
    let pumps = [trickle(a, to: b), trickle(b, to: a)]
    let offer = try await a.createOffer(iceRestart: false)
    try await a.setLocalDescription(offer, kind: .offer)
    try await b.setRemoteDescription(offer, kind: .offer)
    let answer = try await b.createAnswer()
    #expect(answer.sdp.contains("a=setup:passive") && !answer.sdp.contains("a=setup:active"), "\(answer.sdp)")
    try await b.setLocalDescription(answer, kind: .answer)
    try await a.setRemoteDescription(answer, kind: .answer)
    #expect(await waitFor(.dtlsConnected, on: a, log))
    #expect(await waitFor(.firstAudio, on: b, log))
    for pump in pumps { pump.cancel() }
    await a.close()
    await b.close()
    await factoryA.shutdown()
    await factoryB.shutdown()
  }

  // A group call's publisher (send-only): with a camera its offer sends VP8 video, without
  // one it has no video section at all (Janus rejects a video section that offers nothing).
  // The same from a connection prepared ahead (`prepare`, as the group call rings), which the
  // factory then hands out, and does not build again.
  @Test(arguments: [false, true]) func aGroupPublisherOffersVideoOnlyWithACamera(prepared: Bool) async throws {
    let red = GStreamerMedia.VideoSource(pattern: "red", width: 320, height: 180, framerate: 15)
    let publisher = PeerConnectionConfiguration(iceServers: [], video: true, sendOnly: true)
    let subscriber = PeerConnectionConfiguration(iceServers: [], video: true, multistream: true)
    for camera in [red, nil] {
      let factory = GStreamerPeerConnectionFactory(media: GStreamerMedia(audio: .silence, video: camera))
      let shape = GStreamerPeerConnectionFactory.Shape.publisher(video: camera != nil)
      #expect(factory.shape(of: publisher) == shape)
      #expect(factory.shape(of: subscriber) == .subscriber)
      if prepared {
        factory.prepare([publisher, subscriber])
        #expect(factory.spareShapes == [.call, shape, .subscriber])
      }
      let pc = try await factory.makePeerConnection(publisher)
      #expect(factory.spareShapes == (prepared ? [.call, .subscriber] : [.call]))
      if prepared {
        let receiver = try await factory.makePeerConnection(subscriber)
        #expect(factory.spareShapes == [.call])
        await receiver.close()
      }
      await pc.setVideoDirection(.sendonly)
      let offer = try await pc.createOffer(iceRestart: false).sdp
      if camera != nil {
        #expect(MediaDirection.video(in: offer) == .sendonly)
        #expect(SDPMediaSection.first("video", in: offer)?.payloadType(of: "vp8/90000") != nil)
      } else {
        #expect(!offer.contains("m=video"), "\(offer)")
        #expect(offer.contains("m=audio"))
      }
      await pc.close()
      await factory.shutdown()
    }
  }

  // The engine opens the camera before the answer (a caller's video call, an upgrade's fresh
  // connection), while webrtcbin holds the camera's stream blocked until negotiation: asking for
  // the keyframe then must not wait for that stream (it did, and the call hung before its invite).
  @Test(.timeLimit(.minutes(1))) func aCameraTurnedOnBeforeNegotiationNeverBlocks() async throws {
    let red = GStreamerMedia.VideoSource(pattern: "red", width: 320, height: 180, framerate: 30)
    for _ in 0..<30 {
      let pc = try await GStreamerPeerConnectionFactory.build(
        video: true, media: GStreamerMedia(audio: .silence, video: red))
      _ = try await pc.createOffer(iceRestart: false)
      await pc.setVideoEnabled(true)
      try await Task.sleep(for: .milliseconds(30))  // frames reach webrtcbin's blocked pad
      await pc.setVideoEnabled(false)
      await pc.setVideoEnabled(true)
      await pc.close()
    }
  }

  @Test func onlyASendOnlyConnectionWithoutACameraGoesWithoutVideo() {
    let call = PeerConnectionConfiguration(iceServers: [], video: true)
    let publisher = PeerConnectionConfiguration(iceServers: [], video: true, sendOnly: true)
    #expect(GStreamerPeerConnectionFactory.hasVideoSection(call, camera: false))
    #expect(GStreamerPeerConnectionFactory.hasVideoSection(publisher, camera: true))
    #expect(!GStreamerPeerConnectionFactory.hasVideoSection(publisher, camera: false))
    #expect(
      !GStreamerPeerConnectionFactory.hasVideoSection(
        PeerConnectionConfiguration(iceServers: [], video: false), camera: true))
  }

  @Test func severalStreamsVideoIsCountedAsOne() {
    var first = GStreamerPeerConnection.ReceivedVideo()
    first.frames = 40
    first.width = 640
    first.red = 250
    var second = GStreamerPeerConnection.ReceivedVideo()
    second.frames = 12
    second.width = 320
    second.blue = 250
    let empty = GStreamerPeerConnection.ReceivedVideo()
    let merged = GStreamerPeerConnection.ReceivedVideo.merged([first, second, empty])
    #expect(merged.frames == 52 && merged.width == 320 && merged.blue == 250 && merged.red == 0)
    #expect(GStreamerPeerConnection.ReceivedVideo.merged([]) == empty)
  }

  @Test func aBadRemoteDescriptionIsAnErrorNotACrash() async throws {
    let factory = GStreamerPeerConnectionFactory(media: GStreamerMedia(audio: .silence))
    let pc = try await factory.makePeerConnection(PeerConnectionConfiguration(iceServers: [], video: false))
    await #expect(throws: GStreamerError.self) {
      try await pc.setRemoteDescription(SessionDescription(sdp: "this is not sdp"), kind: .offer)
    }
    await #expect(throws: GStreamerError.dataChannelNotOpen) { try await pc.sendData(Data("x".utf8)) }
    await pc.close()
  }

  /// The local candidates a fresh connection gathers for its first offer (until end-of-candidates,
  /// or 10 s).
  private func gathered(_ configuration: PeerConnectionConfiguration) async throws -> [String] {
    let factory = GStreamerPeerConnectionFactory(media: GStreamerMedia(audio: .silence))
    let pc = try await factory.makePeerConnection(configuration)
    let collected = Task {
      var lines: [String] = []
      for await candidate in pc.localCandidates {
        guard let candidate else { break }
        lines.append(candidate.candidate)
      }
      return lines
    }
    let offer = try await pc.createOffer(iceRestart: false)
    try await pc.setLocalDescription(offer, kind: .offer)
    let deadline = Task {
      try? await Task.sleep(for: .seconds(10))
      collected.cancel()
    }
    let lines = await collected.value
    deadline.cancel()
    await pc.close()
    await factory.shutdown()
    return lines
  }

  // A private pre-connect leg (`iceTransportPolicy` relay): webrtcbin gathers no host candidate
  // (here, with no TURN server, none at all), where the same connection with `all` gathers the
  // namespace's address.
  @Test func aRelayOnlyConnectionGathersNoHostCandidate() async throws {
    var relay = PeerConnectionConfiguration(iceServers: [], video: false)
    relay.iceTransportPolicy = .relay
    let relayOnly = try await gathered(relay)
    #expect(!relayOnly.contains { $0.contains(" typ host") || $0.contains(" typ srflx") }, "\(relayOnly)")
    let open = try await gathered(PeerConnectionConfiguration(iceServers: [], video: false))
    #expect(open.contains { $0.contains(" typ host") }, "\(open)")
  }

  @Test func malformedRemoteCandidatesAreIgnoredNotACrash() async throws {
    let factory = GStreamerPeerConnectionFactory(media: GStreamerMedia(audio: .silence))
    let a = try await factory.makePeerConnection(PeerConnectionConfiguration(iceServers: [], video: false))
    let b = try await factory.makePeerConnection(PeerConnectionConfiguration(iceServers: [], video: false))
    let offer = try await a.createOffer(iceRestart: false)
    try await a.setLocalDescription(offer, kind: .offer)
    try await b.setRemoteDescription(offer, kind: .offer)
    for junk in [
      "candidate:garbage", "a=candidate:1 1 udp", String(repeating: "x", count: 4000),
      "candidate:1 1 udp 2122260223 999.1.1.1 70000 typ host", "candidate:1 1 tcp -5 10.0.0.1 1 typ nonsense",
    ] {
      try await b.addRemoteCandidate(IceCandidate(candidate: junk, sdpMLineIndex: 7))
      try await b.addRemoteCandidate(IceCandidate(candidate: junk, sdpMid: "no-such-mid"))
    }
    // webrtcbin handles them on its own thread: give it the time to, then use the connection.
    try await Task.sleep(for: .milliseconds(200))
    let answer = try await b.createAnswer()
    #expect(answer.sdp.hasPrefix("v=0"))
    await a.close()
    await b.close()
  }

  @Test func iceServerURLsBecomeWebrtcbinURIs() {
    let uris = IceServerURIs([
      IceServer(urls: ["stun:stun.example.com:3478", "stun:second.example.com"]),
      IceServer(
        urls: ["turn:turn.example.com?transport=udp", "turns:turn.example.com:443?transport=tcp"],
        username: "1732923200:alice", credential: "a/b+c="),
      IceServer(urls: ["turn:nocreds.example.com"]),
      IceServer(urls: ["turn:?", "turn:", "stun:"], username: "u", credential: "p"),  // malformed: skipped
    ])
    #expect(uris.stun == "stun://stun.example.com:3478")
    #expect(
      uris.turn == [
        "turn://1732923200%3Aalice:a%2Fb%2Bc%3D@turn.example.com:3478?transport=udp",
        "turns://1732923200%3Aalice:a%2Fb%2Bc%3D@turn.example.com:443?transport=tcp",
      ])
  }
}

/// Which milestones each connection reached.
final class MilestoneLog: Sendable {
  private let seen = Locked<[ObjectIdentifier: Set<GStreamerPeerConnection.Milestone>]>([:])

  func follow(_ pc: GStreamerPeerConnection) {
    let id = ObjectIdentifier(pc)
    Task { [weak self] in
      for await m in pc.milestones { self?.seen.withLock { _ = $0[id, default: []].insert(m) } }
    }
  }

  func contains(_ m: GStreamerPeerConnection.Milestone, _ pc: GStreamerPeerConnection) -> Bool {
    seen.withLock { $0[ObjectIdentifier(pc)]?.contains(m) ?? false }
  }
}

@Suite struct GStreamerSDPHelpersTests {
  private let offer = [
    "v=0", "o=- 1 2 IN IP4 0.0.0.0", "s=-", "t=0 0", "a=group:BUNDLE 0 1",
    "m=audio 9 UDP/TLS/RTP/SAVPF 96 0", "a=mid:0", "a=rtpmap:96 opus/48000/2", "a=rtpmap:0 PCMU/8000",
    "a=fingerprint:sha-256 AA:BB",
    "m=application 9 UDP/DTLS/SCTP webrtc-datachannel", "a=mid:data", "a=fingerprint:sha-256 AA:BB", "",
  ].joined(separator: "\r\n")

  @Test func theOfferersOpusPayloadTypeIsFound() {
    #expect(GStreamerMedia.opusPayloadType(in: offer) == 96)
    #expect(GStreamerMedia.opusPayloadType(in: "v=0\r\nm=video 9 RTP/AVP 96\r\na=rtpmap:96 VP8/90000\r\n") == nil)
  }

  @Test func rejectedSectionsAreFound() {
    let answer =
      "v=0\r\nm=audio 0 UDP/TLS/RTP/SAVPF 0\r\na=mid:audio0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\n"
    #expect(GStreamerPeerConnection.rejectedSections(in: answer) == ["audio"])
    #expect(GStreamerPeerConnection.rejectedSections(in: offer).isEmpty)
  }

  @Test func anAnswerRejectingOurAudioIsAnErrorNotACrash() async throws {
    let factory = GStreamerPeerConnectionFactory(media: GStreamerMedia(audio: .silence))
    let pc = try await factory.makePeerConnection(PeerConnectionConfiguration(iceServers: [], video: false))
    let offer = try await pc.createOffer(iceRestart: false)
    try await pc.setLocalDescription(offer, kind: .offer)
    let rejecting = offer.sdp.replacingOccurrences(of: "m=audio 9 ", with: "m=audio 0 ")
    await #expect(throws: GStreamerError.self) {
      try await pc.setRemoteDescription(SessionDescription(sdp: rejecting), kind: .answer)
    }
    await pc.close()
  }

  @Test func theVideoSSRCsOfADescriptionAreFound() {
    let sdp =
      "v=0\r\nm=audio 9 RTP/AVP 111\r\na=ssrc:11 cname:x\r\nm=video 9 RTP/AVP 96\r\na=ssrc:22 cname:x\r\n"
      + "a=ssrc:22 msid:a b\r\na=ssrc:33 cname:x\r\n"
    #expect(GStreamerMedia.videoSSRCs(in: sdp) == [22, 33])
    #expect(GStreamerMedia.videoSSRCs(in: offer).isEmpty)
  }

  @Test func aCallsLaterConnectionsRecordToFilesOfTheirOwn() {
    #expect(GStreamerPeerConnectionFactory.recording("/tmp/out.webm", index: 1) == "/tmp/out.webm")
    #expect(GStreamerPeerConnectionFactory.recording("/tmp/out.webm", index: 2) == "/tmp/out-2.webm")
    #expect(GStreamerPeerConnectionFactory.recording("/tmp/out", index: 3) == "/tmp/out-3.webm")
  }

  @Test func midsAreReadPerMediaSection() {
    #expect(GStreamerPeerConnection.mids(of: offer) == ["0", "data"])
  }

  @Test func everyFingerprintLineBecomesOurs() {
    let replaced = GStreamerPeerConnection.replacingFingerprints(in: offer, with: "01:02")
    #expect(!replaced.contains("AA:BB"))
    #expect(replaced.components(separatedBy: "a=fingerprint:sha-256 01:02").count == 3)
    #expect(replaced.hasSuffix("\r\n"))
  }
}
