import DialtoneClient
import DialtoneProtocol
import DialtoneSupport
import Foundation
import Testing

@testable import DialtoneGStreamer

/// The audio jitter buffer declares a packet lost when its time is up, even while nothing comes
/// after it (`dt_jitterbuffer_expect_packets`), so the decoder hears of a burst's loss while the
/// burst lasts. Without it, rtpjitterbuffer notices a missing packet only when a later one
/// arrives: at the burst's end.
@Suite(.serialized) struct JitterBufferLossOnTimeTests {
  /// Pumps one side's local candidates into the other, through the relay.
  private func trickle(
    _ from: GStreamerPeerConnection, _ side: UDPRelay.Side, to: GStreamerPeerConnection, via relay: UDPRelay
  ) -> Task<Void, Never> {
    Task {
      for await candidate in from.localCandidates {
        guard let candidate, let relayed = relay.relayed(candidate, from: side) else { continue }
        try? await to.addRemoteCandidate(relayed)
      }
    }
  }

  /// Polls `condition` every 20 ms for up to `seconds`.
  private func eventually(within seconds: Double, _ condition: () async -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
      if await condition() { return true }
      try? await Task.sleep(for: .milliseconds(20))
    }
    return await condition()
  }

  // A sends a tone to B through a relay the test owns; then the relay drops everything A sends.
  // While it still drops, B's jitter buffer must declare a packet lost: the one due next, at its
  // time. (GStreamer 1.22 arms that timer only for the packet after the last that arrived, so
  // only the burst's first packet is declared on time; the rest are when the burst ends.)
  @Test func aBurstOfTotalLossIsDeclaredToTheDecoderBeforeTheBurstEnds() async throws {
    let relay = try UDPRelay()
    defer { relay.stop() }
    let decoded = Locked(0)  // samples B decoded (S16LE mono, 48 kHz)
    let factoryA = GStreamerPeerConnectionFactory(media: GStreamerMedia(audio: .tone(frequency: 523)))
    let factoryB = GStreamerPeerConnectionFactory(
      media: GStreamerMedia(audio: .silence) { audio in decoded.withLock { $0 += audio.samples.count / 2 } })
    let config = PeerConnectionConfiguration(iceServers: [], video: false, dataChannel: false)
    let a = try #require(try await factoryA.makePeerConnection(config) as? GStreamerPeerConnection)
    let b = try #require(try await factoryB.makePeerConnection(config) as? GStreamerPeerConnection)
    let pumps = [trickle(a, .a, to: b, via: relay), trickle(b, .b, to: a, via: relay)]
    defer { for pump in pumps { pump.cancel() } }

    let offer = try await a.createOffer(iceRestart: false)
    try await a.setLocalDescription(offer, kind: .offer)
    try await b.setRemoteDescription(offer, kind: .offer)
    let answer = try await b.createAnswer()
    try await b.setLocalDescription(answer, kind: .answer)
    try await a.setRemoteDescription(answer, kind: .answer)

    // A second of A's audio at B, all of it through the relay.
    #expect(await eventually(within: 15) { decoded.withLock { $0 } >= 48_000 })
    #expect(relay.forwardedRTPFromA >= 50)

    let lostBefore = b.audioPacketsDeclaredLost
    relay.dropFromA(true)
    let sent = relay.forwardedRTPFromA
    let declared = await eventually(within: 5) { b.audioPacketsDeclaredLost > lostBefore }
    let lostInBurst = b.audioPacketsDeclaredLost
    // A burst of at least a dozen of A's packets (audio at 50 a second, and its RTCP).
    #expect(await eventually(within: 5) { relay.droppedFromA >= 12 })
    // Nothing of A's reached B meanwhile: what was declared lost had not come.
    #expect(relay.forwardedRTPFromA == sent)
    relay.dropFromA(false)
    #expect(declared, "B declared \(lostInBurst - lostBefore) packets lost while the burst lasted")

    // After the burst: A's audio reaches B again, and the burst's packets are counted lost.
    let resumed = decoded.withLock { $0 }
    #expect(await eventually(within: 10) { decoded.withLock { $0 } > resumed + 48_000 })
    #expect(await eventually(within: 10) { await b.stats().packetsLost >= 5 })

    await a.close()
    await b.close()
    await factoryA.shutdown()
    await factoryB.shutdown()
  }
}
