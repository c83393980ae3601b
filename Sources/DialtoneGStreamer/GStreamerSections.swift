internal import CGStreamer
import DialtoneClient
import DialtoneProtocol
import DialtoneSupport
import Foundation

/// The sections of a group call's single subscriber connection (protocol.md 20.9): which
/// participant each m-section (mid) carries now, and where each participant's media goes. The
/// map changes with every offer the SFU makes, and a mid the SFU reuses carries someone else
/// from then on; media of a mid no offer names (an inactive section) goes nowhere.
///
/// A remote stream is told apart by its SSRC, from the latest offer's `a=ssrc` lines, not by
/// the transceiver webrtcbin 1.22 files it under: that one is right only if the offer naming
/// the SSRC was applied before the stream's first packet arrived. Janus forwards a participant
/// from the moment it makes the offer that adds them, so on a connection that is already up
/// their first packets often beat the offer (a device whose signaling lags behind its media),
/// and webrtcbin then files the stream under m-line 0 for good (`dt__pad_ssrc`).
public final class GStreamerSections: Sendable {
  private struct State: Sendable {
    var owners: [String: Peer] = [:]
    /// The mid of each SSRC the latest offer names (`a=ssrc:<ssrc> …` in that section).
    var ssrcMids: [UInt32: String] = [:]
    var sinks: [Peer: @Sendable (RemoteAudio) -> Void] = [:]
    var video: [Peer: GStreamerPeerConnection.ReceivedVideo] = [:]
    /// Participants in the order they first had a section.
    var order: [Peer] = []
  }
  private let state = Locked(State())
  private let participantAudio: (@Sendable (Peer) -> (@Sendable (RemoteAudio) -> Void)?)?

  init(participantAudio: (@Sendable (Peer) -> (@Sendable (RemoteAudio) -> Void)?)?) {
    self.participantAudio = participantAudio
  }

  func set(_ sections: [GroupStreamSection]) {
    let fresh = state.withLock { state -> [Peer] in
      state.owners = Dictionary(sections.map { ($0.mid, $0.from) }, uniquingKeysWith: { _, last in last })
      let fresh = Set(sections.map(\.from)).filter { state.sinks[$0] == nil && !state.order.contains($0) }
      state.order += sections.map(\.from).filter { fresh.contains($0) }.reduce(into: [Peer]()) {
        if !$0.contains($1) { $0.append($1) }
      }
      return Array(fresh)
    }
    // Each participant's sink is made once (outside the lock: it may open a file).
    for peer in fresh {
      guard let sink = participantAudio?(peer) else { continue }
      state.withLock { $0.sinks[peer] = $0.sinks[peer] ?? sink }
    }
  }

  /// Where the audio of the stream `ssrc`, which webrtcbin filed under section `mid`, goes now
  /// (nil: a stream of nobody's, or no sink).
  func audioSink(of mid: String, ssrc: UInt32) -> (@Sendable (RemoteAudio) -> Void)? {
    state.withLock { state in
      Self.section(of: ssrc, filedUnder: mid, state).flatMap { state.owners[$0] }.flatMap { state.sinks[$0] }
    }
  }

  func videoFrame(of mid: String, ssrc: UInt32, width: Int, height: Int, red: Int, green: Int, blue: Int) {
    state.withLock { state in
      guard let section = Self.section(of: ssrc, filedUnder: mid, state), let peer = state.owners[section] else {
        return
      }
      var video = state.video[peer] ?? .init()
      video.frames += 1
      (video.width, video.height) = (width, height)
      (video.red, video.green, video.blue) = (red, green, blue)
      state.video[peer] = video
    }
  }

  /// The section whose media the stream `ssrc` (filed under `mid`) is: the one the latest offer
  /// names it in. A stream no offer names yet (its first packets came before the offer) or any
  /// more (a departed participant's last packets) is nobody's, unless the section it was filed
  /// under names no SSRC at all (an SFU that does not signal SSRCs): then that section.
  private static func section(of ssrc: UInt32, filedUnder mid: String, _ state: State) -> String? {
    if let named = state.ssrcMids[ssrc] { return named }
    return state.ssrcMids.values.contains(mid) ? nil : mid
  }

  /// The SSRCs `sdp` names, each with its section's mid (RTX and FEC SSRCs included: they are
  /// never decoded as a stream of their own).
  static func ssrcMids(in sdp: String) -> [UInt32: String] {
    var mids: [UInt32: String] = [:]
    for section in SDPLines(sdp).sections {
      guard let mid = section.attribute("mid") else { continue }
      for line in section.lines where line.hasPrefix("a=ssrc:") {
        let value = line.dropFirst("a=ssrc:".count).prefix { $0 != " " }
        if let ssrc = UInt32(value) { mids[ssrc] = mid }
      }
    }
    return mids
  }

  /// Each participant's video so far, in the order they first had a section.
  var videoByParticipant: [(from: Peer, video: GStreamerPeerConnection.ReceivedVideo)] {
    state.withLock { state in state.order.map { ($0, state.video[$0] ?? .init()) } }
  }

  // MARK: Sections held open

  /// webrtcbin 1.22 cannot change a negotiated direction ("transceiver direction changes are
  /// not implemented"), while the SFU marks a departed participant's section `inactive` and
  /// later makes it `sendonly` again for the next participant. So webrtcbin never sees a
  /// section go inactive: it is shown the SFU's offer with those sections still `sendonly`
  /// (nothing arrives on them meanwhile), and the answer says `inactive` for them on the wire
  /// only (JSEP: an inactive offer is answered inactive), `recvonly` again when applied locally.
  private let heldOpen = Locked<Set<String>>([])

  /// The SFU's offer as webrtcbin is shown it. From now on its `a=ssrc` lines say whose each
  /// stream is.
  func remote(offer: SessionDescription) -> SessionDescription {
    let (sdp, inactive) = Self.directions(in: offer.sdp, from: .inactive, to: .sendonly, only: nil)
    heldOpen.withLock { $0 = inactive }
    let ssrcMids = Self.ssrcMids(in: offer.sdp)
    state.withLock { $0.ssrcMids = ssrcMids }
    return SessionDescription(sdp: sdp)
  }

  /// webrtcbin's answer as the SFU is sent it.
  func wire(answer: SessionDescription) -> SessionDescription {
    let answer = Self.passive(answer)
    let held = heldOpen.current
    guard !held.isEmpty else { return answer }
    return SessionDescription(sdp: Self.directions(in: answer.sdp, from: .recvonly, to: .inactive, only: held).sdp)
  }

  /// `answer` with this side the DTLS server (`a=setup:passive`; webrtcbin answers `active`).
  /// As the client, webrtcbin sends its first handshake flight as soon as it has applied the
  /// answer, before ICE has a pair to carry it, and that flight is lost: the handshake then
  /// waits for DTLS's one-second retransmission (about half of the subscriber connections in the
  /// e2e runs connected at ~1.1 s instead of ~0.1 s). Janus, the client now, starts once its ICE
  /// is connected.
  static func passive(_ answer: SessionDescription) -> SessionDescription {
    var description = SDPLines(answer.sdp)
    var changed = false
    for index in description.sections.indices {
      for line in description.sections[index].lines.indices
      where description.sections[index].lines[line] == "a=setup:active" {
        description.sections[index].lines[line] = "a=setup:passive"
        changed = true
      }
    }
    return changed ? SessionDescription(sdp: description.text) : answer
  }

  /// The answer as webrtcbin applies it locally.
  func local(answer: SessionDescription) -> SessionDescription {
    let held = heldOpen.current
    guard !held.isEmpty else { return answer }
    return SessionDescription(sdp: Self.directions(in: answer.sdp, from: .inactive, to: .recvonly, only: held).sdp)
  }

  /// `sdp` with `a=<from>` turned into `a=<to>` in the sections whose mid is in `only` (every
  /// section when nil); and the mids of the sections changed.
  static func directions(in sdp: String, from: MediaDirection, to: MediaDirection, only: Set<String>?) -> (
    sdp: String, changed: Set<String>
  ) {
    var description = SDPLines(sdp)
    var changed: Set<String> = []
    for index in description.sections.indices {
      guard let mid = description.sections[index].attribute("mid"), only?.contains(mid) ?? true,
        description.sections[index].replaceDirection(from, with: to)
      else { continue }
      changed.insert(mid)
    }
    return (description.text, changed)
  }
}

extension GStreamerMedia {
  /// The media of a single subscriber connection: nothing to send, each section's audio to
  /// its participant's sink (`GStreamerSections`).
  func receivingSections() -> GStreamerMedia {
    var media = self
    media.audio = .silence
    media.sends = false
    media.remoteAudio = nil
    return media
  }
}

extension GStreamerPeerConnection {
  /// The subscriber connection's sections, from the offer about to be applied.
  public func setRemoteSections(_ sections: [GroupStreamSection]) async {
    self.sections?.set(sections)
  }

  /// A single subscriber connection: each participant's decoded video so far (empty for any
  /// other connection, whose `videoReceived()` is its one participant's).
  public func videoByParticipant() -> [(from: Peer, video: ReceivedVideo)] {
    sections?.videoByParticipant ?? []
  }

  /// Audio decoded from the stream `ssrc`, filed under section `mid`.
  fileprivate func sectionAudio(_ mid: String, ssrc: UInt32, _ samples: UnsafeRawBufferPointer, now: UInt64) {
    remoteAudio(samples, now: now, to: sections?.audioSink(of: mid, ssrc: ssrc))
  }

  fileprivate func sectionVideo(
    _ mid: String, ssrc: UInt32, width: Int, height: Int, red: Int, green: Int, blue: Int
  ) {
    remoteVideoFrame(width: width, height: height, red: red, green: green, blue: blue)
    sections?.videoFrame(of: mid, ssrc: ssrc, width: width, height: height, red: red, green: green, blue: blue)
  }
}

private func sectionConnection(_ ctx: UnsafeMutableRawPointer?) -> GStreamerPeerConnection? {
  guard let ctx else { return nil }
  return Unmanaged<GStreamerPeerConnection>.fromOpaque(ctx).takeUnretainedValue()
}

let onSectionAudio: dt_mid_audio_cb = { ctx, mid, ssrc, data, size, now in
  guard let mid, let data, size > 0 else { return }
  sectionConnection(ctx)?.sectionAudio(
    String(cString: mid), ssrc: ssrc, UnsafeRawBufferPointer(start: data, count: Int(size)), now: UInt64(now))
}

let onSectionVideo: dt_mid_video_cb = { ctx, mid, ssrc, width, height, red, green, blue in
  guard let mid else { return }
  sectionConnection(ctx)?.sectionVideo(
    String(cString: mid), ssrc: ssrc, width: Int(width), height: Int(height), red: Int(red), green: Int(green),
    blue: Int(blue))
}
