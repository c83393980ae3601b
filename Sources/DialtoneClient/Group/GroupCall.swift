import DialtoneProtocol
import DialtoneSupport
import Foundation

/// One device's part in a group call, whose media goes through the server's SFU.
///
/// With Janus (proxied) the device has one `publisher` connection that sends its audio (and,
/// in a video call, its camera), and one receive-only connection per other participant with
/// that participant's audio and video, offered by the server as `group-offer` (one stream per
/// connection: webrtcbin 1.22 cannot take new m-lines mid-call). With LiveKit the server hands
/// over `{url, token}` (`Event.liveKit`) and the app connects LiveKit's SDK.
///
/// The app feeds the call's server messages through `handle(_:)` (`CallClient` does) and
/// observes `events`.
public actor GroupCall {
  public enum State: Sendable, Equatable {
    /// A ring: `join()` to answer, `decline()` to refuse.
    case ringing
    /// Joining: waiting for the server and the SFU.
    case joining
    /// In the call (the publisher may still be connecting).
    case joined
    /// Over for this device: left here (`nil`), or ended by the server with its reason.
    case ended(GroupEndReason?)
  }

  public enum Event: Sendable {
    case state(State)
    /// The participant list changed.
    case participants(GroupCallState)
    /// LiveKit: connect to `url` with `token`.
    case liveKit(url: String, token: String)
    /// A remote participant's media arrived on its own connection.
    case remoteStreamAdded(stream: String, from: Peer, connection: any PeerConnection)
    /// A remote stream's connection state changed.
    case remoteStreamState(stream: String, from: Peer, PeerConnectionState)
    /// A remote participant's stream is gone (they left).
    case remoteStreamRemoved(stream: String, from: Peer)
    /// This device's own publisher connection changed state.
    case publisherState(PeerConnectionState)
    /// A request failed or a connection could not be made.
    case error(String)
  }

  /// How the call was entered.
  public enum Entry: Sendable, Equatable {
    case create(members: [String], title: String?)
    case invited(ServerMessage.GroupInvite)
    case join
    /// A room by name, already joined by `CallClient.joinRoom` (which learns the call's id).
    case joinedRoom(GroupCallState)
  }

  private struct Stream {
    let connection: any PeerConnection
    let from: Peer?
    var remoteDescriptionSet = false
    var pendingCandidates: [IceCandidate] = []
    var listeners: [Task<Void, Never>] = []
  }

  public nonisolated let callId: CallID
  public nonisolated let entry: Entry
  public nonisolated let video: Bool
  public nonisolated let events: AsyncStream<Event>
  public private(set) var state: State
  public private(set) var group: GroupCallState?
  public private(set) var isMuted = false

  private static let publisherStream = "publisher"
  private let signaling: any GroupSignaling
  private let factory: any PeerConnectionFactory
  private let iceServers: [IceServer]
  private let eventSink: AsyncStream<Event>.Continuation
  private var streams: [String: Stream] = [:]
  /// Offered streams whose connection is being made, with the candidates that came meanwhile.
  private var opening: [String: [IceCandidate]] = [:]
  private let inbox: AsyncStream<ServerMessage>
  private let inboxSink: AsyncStream<ServerMessage>.Continuation
  private var pump: Task<Void, Never>?

  public init(
    callId: CallID, entry: Entry, video: Bool = false, iceServers: [IceServer], factory: any PeerConnectionFactory,
    signaling: any GroupSignaling
  ) {
    self.callId = callId
    self.entry = entry
    self.video = video
    self.iceServers = iceServers
    self.factory = factory
    self.signaling = signaling
    if case .invited(let invite) = entry {
      state = .ringing
      group = invite.group
    } else {
      state = .joining
    }
    (events, eventSink) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    (inbox, inboxSink) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
  }

  // MARK: - Actions

  /// Creates, joins or answers the call as `entry` says. Returns the call's id as the server
  /// knows it (a room's live call may have another id than the one proposed).
  @discardableResult
  public func start() async -> CallID? {
    if pump == nil {
      let inbox = self.inbox
      pump = Task { [weak self] in
        for await message in inbox { await self?.dispatch(message) }
      }
    }
    let request: ClientMessage
    switch entry {
    case .create(let members, let title):
      request = .groupCreate(.init(callId: callId, members: members, video: video, title: title))
    case .invited:
      _ = try? await signaling.send(.groupRinging(.init(callId: callId)))
      return callId
    case .join:
      request = .groupJoin(.init(callId: callId))
    case .joinedRoom(let state):
      group = state
      eventSink.yield(.participants(state))
      set(.joined)
      return callId
    }
    return await perform(request)
  }

  /// Answers a ring.
  public func join() async {
    guard state == .ringing else { return }
    await perform(.groupJoin(.init(callId: callId)))
  }

  /// Refuses a ring (for every device of this user).
  public func decline() async {
    guard state == .ringing else { return }
    await settle(.groupDecline(.init(callId: callId)))
    await finish(nil)
  }

  /// Leaves the call; it goes on for the others.
  public func leave() async {
    guard !isEnded else { return }
    if state == .ringing {
      return await decline()
    }
    await settle(.groupLeave(.init(callId: callId)))
    await finish(nil)
  }

  /// Ends the call for everyone (the creator only; before anyone joined, it cancels the ring).
  public func endForAll() async {
    guard !isEnded else { return }
    await settle(.groupEnd(.init(callId: callId)))
    await finish(nil)
  }

  public func setMuted(_ muted: Bool) async {
    isMuted = muted
    await streams[Self.publisherStream]?.connection.setAudioEnabled(!muted)
  }

  /// The statistics of each connection, by stream.
  public func stats() async -> [String: PeerConnectionStats] {
    var result: [String: PeerConnectionStats] = [:]
    for (id, stream) in streams { result[id] = await stream.connection.stats() }
    return result
  }

  // MARK: - Server messages

  /// Takes the call's server messages in order, without waiting: each offered stream's
  /// connection is made beside the others (a device joining a call of eight gets seven offers
  /// at once), while everything else is handled in order. `CallClient` delivers here.
  public nonisolated func receive(_ message: ServerMessage) {
    inboxSink.yield(message)
  }

  private func dispatch(_ message: ServerMessage) async {
    if case .groupOffer(let offer) = message {
      guard beginOpening(offer) else { return }
      Task { await self.openRemoteStream(offer) }
    } else {
      await handle(message)
    }
  }

  /// Handles one message and waits for what it started (an offered stream's connection too).
  public func handle(_ message: ServerMessage) async {
    guard !isEnded else { return }
    switch message {
    case .groupUpdate(let m):
      group = m.group
      eventSink.yield(.participants(m.group))
    case .groupMedia(let m):
      await mediaReady(m)
    case .groupAnswer(let m):
      await applyAnswer(m)
    case .groupOffer(let m):
      guard beginOpening(m) else { return }
      await openRemoteStream(m)
    case .groupCandidate(let m):
      await addRemoteCandidate(m.candidate, stream: m.stream)
    case .groupStreamEnded(let m):
      await closeStream(m.stream)
    case .groupEnded(let m):
      await finish(m.reason)
    default:
      break
    }
  }

  // MARK: - Media

  private func mediaReady(_ media: ServerMessage.GroupMedia) async {
    switch media.sfu {
    case .livekit:
      guard let url = media.url, let token = media.token else {
        eventSink.yield(.error("group-media for LiveKit without url and token"))
        return
      }
      eventSink.yield(.liveKit(url: url, token: token))
    case .janus:
      guard streams[Self.publisherStream] == nil else { return }
      do {
        let connection = try await factory.makePeerConnection(
          PeerConnectionConfiguration(iceServers: iceServers, video: video, sendOnly: true))
        guard !isEnded else { return await connection.close() }
        var stream = Stream(connection: connection, from: nil)
        stream.listeners = listen(connection, stream: Self.publisherStream, from: nil)
        streams[Self.publisherStream] = stream
        if isMuted { await connection.setAudioEnabled(false) }
        if video {
          // A publisher only sends: the others' video comes on their own streams. (Without a
          // camera the engine made no video section: this does nothing.)
          await connection.setVideoDirection(.sendonly)
          await connection.setVideoEnabled(true)
        }
        let offer = try await connection.createOffer(iceRestart: false)
        try await connection.setLocalDescription(offer, kind: .offer)
        try await signaling.send(.groupOffer(.init(callId: callId, stream: Self.publisherStream, sdp: offer.sdp)))
      } catch {
        eventSink.yield(.error("could not publish: \(error)"))
      }
    }
  }

  private func applyAnswer(_ answer: ServerMessage.GroupDescription) async {
    guard let stream = streams[answer.stream], !stream.remoteDescriptionSet else { return }
    do {
      try await stream.connection.setRemoteDescription(SessionDescription(sdp: answer.sdp), kind: .answer)
      await remoteDescriptionApplied(answer.stream)
    } catch {
      eventSink.yield(.error("the SFU's answer was refused: \(error)"))
    }
  }

  /// Claims an offered stream's id, so its candidates wait and its end is seen while the
  /// connection is made.
  private func beginOpening(_ offer: ServerMessage.GroupDescription) -> Bool {
    guard !isEnded, offer.from != nil, streams[offer.stream] == nil, opening[offer.stream] == nil else { return false }
    opening[offer.stream] = []
    return true
  }

  private func openRemoteStream(_ offer: ServerMessage.GroupDescription) async {
    guard let from = offer.from else { return }
    do {
      let connection = try await factory.makePeerConnection(
        PeerConnectionConfiguration(iceServers: iceServers, video: video, remoteParticipant: from))
      // Gone meanwhile: the stream ended, or the call did.
      guard !isEnded, let early = opening.removeValue(forKey: offer.stream) else { return await connection.close() }
      var stream = Stream(connection: connection, from: from)
      stream.pendingCandidates = early
      stream.listeners = listen(connection, stream: offer.stream, from: from)
      streams[offer.stream] = stream
      eventSink.yield(.remoteStreamAdded(stream: offer.stream, from: from, connection: connection))
      try await connection.setRemoteDescription(SessionDescription(sdp: offer.sdp), kind: .offer)
      await remoteDescriptionApplied(offer.stream)
      let answer = try await connection.createAnswer()
      try await connection.setLocalDescription(answer, kind: .answer)
      try await signaling.send(.groupAnswer(.init(callId: callId, stream: offer.stream, sdp: answer.sdp)))
    } catch {
      eventSink.yield(.error("could not receive \(from.userId): \(error)"))
    }
  }

  private func addRemoteCandidate(_ candidate: IceCandidate, stream id: String) async {
    if opening[id] != nil {
      opening[id]?.append(candidate)
      return
    }
    guard var stream = streams[id] else { return }
    guard stream.remoteDescriptionSet else {
      stream.pendingCandidates.append(candidate)
      streams[id] = stream
      return
    }
    try? await stream.connection.addRemoteCandidate(candidate)
  }

  /// Candidates that came before the description go in after it (rule 2).
  private func remoteDescriptionApplied(_ id: String) async {
    guard var stream = streams[id] else { return }
    stream.remoteDescriptionSet = true
    let pending = stream.pendingCandidates
    stream.pendingCandidates = []
    streams[id] = stream
    for candidate in pending { try? await stream.connection.addRemoteCandidate(candidate) }
  }

  private func closeStream(_ id: String) async {
    if opening.removeValue(forKey: id) != nil { return }  // its opener closes the connection
    guard let stream = streams.removeValue(forKey: id) else { return }
    for listener in stream.listeners { listener.cancel() }
    await stream.connection.close()
    if let from = stream.from { eventSink.yield(.remoteStreamRemoved(stream: id, from: from)) }
  }

  /// Trickles the connection's candidates and reports its states.
  private func listen(_ connection: any PeerConnection, stream: String, from: Peer?) -> [Task<Void, Never>] {
    let signaling = self.signaling
    let callId = self.callId
    let sink = eventSink
    let candidates = Task {
      for await candidate in connection.localCandidates {
        if let candidate {
          _ = try? await signaling.send(
            .groupCandidate(.init(callId: callId, stream: stream, candidate: candidate)))
        } else {
          _ = try? await signaling.send(.groupEndOfCandidates(.init(callId: callId, stream: stream)))
        }
      }
    }
    let states = Task {
      for await state in connection.connectionStates {
        if let from {
          sink.yield(.remoteStreamState(stream: stream, from: from, state))
        } else {
          sink.yield(.publisherState(state))
        }
      }
    }
    return [candidates, states]
  }

  // MARK: - State

  private var isEnded: Bool {
    if case .ended = state { return true }
    return false
  }

  /// Sends a decline / leave / end and waits (a bounded while) for the server to take it, so
  /// an app that quits right after does not lose it.
  private func settle(_ request: ClientMessage) async {
    let signaling = self.signaling
    await withTaskGroup(of: Void.self) { group in
      group.addTask { _ = try? await signaling.request(request) }
      group.addTask { try? await Task.sleep(for: .seconds(3)) }
      await group.next()
      group.cancelAll()
    }
  }

  /// Sends a create / join request and applies its answer.
  @discardableResult
  private func perform(_ request: ClientMessage) async -> CallID? {
    set(.joining)
    do {
      let reply = try await signaling.request(request)
      switch reply {
      case .ack(let ack):
        if let group = ack.group {
          self.group = group
          eventSink.yield(.participants(group))
        }
        if !isEnded { set(.joined) }
        return ack.callId ?? callId
      case .error(let error):
        eventSink.yield(.error("\(error.code.rawValue): \(error.message)"))
      default:
        eventSink.yield(.error("unexpected answer \(reply.typeName)"))
      }
    } catch {
      eventSink.yield(.error("\(error)"))
    }
    await finish(nil)
    return nil
  }

  private func set(_ new: State) {
    guard state != new, !isEnded else { return }
    state = new
    eventSink.yield(.state(new))
  }

  private func finish(_ reason: GroupEndReason?) async {
    guard !isEnded else { return }
    state = .ended(reason)
    let open = streams
    streams = [:]
    opening = [:]
    inboxSink.finish()
    for stream in open.values {
      for listener in stream.listeners { listener.cancel() }
      await stream.connection.close()
    }
    eventSink.yield(.state(.ended(reason)))
    eventSink.finish()
  }
}
