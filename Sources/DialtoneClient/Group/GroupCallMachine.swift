import DialtoneProtocol

/// One device's part in a group call as a pure value: `handle(_:)` takes an event (an app
/// action, a server message, an answer to a request, a peer-connection result or callback) and
/// returns the effects to run. `GroupCall` runs them and feeds their results back.
///
/// Each stream (the device's own `publisher`, and either one receive-only connection per other
/// participant offered by the SFU or, when the server granted `multistream`, one `subscriber`
/// connection carrying everyone, renegotiated by each offer of the SFU) is named by a
/// `StreamRef` (its id and a generation, so a stream id the SFU reuses is never confused with
/// the one that ended), and its negotiation is one `Stream.Step`. Candidates on either side
/// wait for the description they belong to (rule 2).
public struct GroupCallMachine: Sendable {
  public enum Event: Sendable, Equatable {
    case start
    case join
    case decline
    case leave
    case endForAll
    /// Ring more users into the call (`group-invite`; who may is the server's policy).
    case invite([String])
    /// Take a member out of the call (`group-remove`; the call's owner only).
    case remove(String)
    case setMuted(Bool)
    case server(ServerMessage)
    /// The server's answer to the create or join request.
    case replied(ServerMessage)
    /// The create or join request could not be sent.
    case requestFailed(String)
    /// The decline, leave or end-for-all was answered (or its wait ran out).
    case settled
    /// The server's answer to an invite or a remove.
    case asked(ServerMessage)
    /// The invite or remove could not be sent.
    case askFailed(String)
    /// `canRestartIce`: whether the connection restarts ICE in place (`PeerConnection`).
    case connectionMade(StreamRef, canRestartIce: Bool = true)
    case connectionFailed(StreamRef, String)
    case descriptionCreated(StreamRef, SessionDescription)
    case localDescriptionSet(StreamRef)
    case remoteDescriptionSet(StreamRef)
    /// `createOffer`, `createAnswer`, `setLocalDescription` or `setRemoteDescription` threw.
    case descriptionFailed(StreamRef, String)
    case localCandidate(StreamRef, IceCandidate?)
    case connectionState(StreamRef, PeerConnectionState)
    /// A timer armed with `.arm` fired.
    case timerFired(Int)
    /// The device's network path changed (an address went or came): every connection to the
    /// SFU, one host, lost the path it used; each restarts now.
    case networkChanged
  }

  public enum Effect: Sendable, Equatable {
    /// Send without waiting; messages leave in order.
    case send(ClientMessage)
    /// Send and wait for the server's answer: `.replied` or `.requestFailed` follows.
    case request(ClientMessage)
    /// Send and wait for the server's answer without holding up the call (invite, remove):
    /// `.asked` or `.askFailed` follows.
    case ask(ClientMessage)
    /// Send and wait a bounded while for the server to take it (an app that quits right after
    /// must not lose it): `.settled` follows.
    case settle(ClientMessage)
    /// Make a stream's connection: `.connectionMade` or `.connectionFailed` follows.
    case makeConnection(StreamRef, PeerConnectionConfiguration)
    /// The connections this device will probably make soon (its publisher and, when it asks
    /// for one, its subscriber connection): the factory may build them while the call rings
    /// or the create or join request is on its way (`PeerConnectionFactory.prepare`).
    case prepareConnections([PeerConnectionConfiguration])
    case setAudio(StreamRef, Bool)
    case setVideoDirection(StreamRef, MediaDirection)
    case setVideo(StreamRef, Bool)
    /// The subscriber connection: whose media each m-section carries, from the offer about to
    /// be applied on.
    case setRemoteSections(StreamRef, [GroupStreamSection])
    case createOffer(StreamRef)
    /// The publisher's offer with new ICE credentials, on the same connection.
    case createRestartOffer(StreamRef)
    case createAnswer(StreamRef)
    case setLocal(StreamRef, SessionDescription, SessionDescriptionKind)
    case setRemote(StreamRef, SessionDescription, SessionDescriptionKind)
    case addCandidate(StreamRef, IceCandidate)
    case close(StreamRef)
    /// A stream's recovery timer (rule 3): `.timerFired` follows unless cancelled.
    case arm(Int, after: Duration)
    case cancel(Int)
    /// For the app (`GroupCall.Event`).
    case notify(Notice)
    /// The call is over for this device: close every connection, then report `state` (ended)
    /// and finish the events.
    case finish(GroupCall.State)
  }

  /// What the app hears (`GroupCall.Event`, where a new stream also carries its connection).
  public enum Notice: Sendable, Equatable {
    case state(GroupCall.State)
    case participants(GroupCallState)
    case liveKit(url: String, token: String)
    case remoteStreamAdded(StreamRef, from: Peer)
    case remoteStreamState(stream: String, from: Peer, PeerConnectionState)
    case remoteStreamRemoved(stream: String, from: Peer)
    case publisherState(PeerConnectionState)
    case error(String)
  }

  /// A stream's connection: its id and the generation that tells apart two streams of one id.
  public struct StreamRef: Hashable, Sendable {
    public let id: String
    public let generation: Int
  }

  /// Where the call is for this device.
  enum Phase: Sendable, Equatable {
    case ringing
    /// The create or join request is on its way.
    case joining
    case joined
    /// A decline, leave or end-for-all is on its way; the app still sees `shown`.
    case leaving(shown: GroupCall.State)
    case ended(GroupEndReason?)
  }

  /// One connection and its negotiation.
  struct Stream: Sendable, Equatable {
    enum Step: Sendable, Equatable {
      case making
      /// Publisher: the offer is being created. Remote: the answer.
      case creating
      case settingLocal(SessionDescription)
      /// Publisher, made ahead (`offersAhead`): its offer is ready and goes out with the
      /// server's `group-media`.
      case awaitingMedia(SessionDescription)
      /// Publisher: its offer is out; the SFU's answer is awaited.
      case awaitingAnswer
      /// Publisher: the SFU's answer; remote: the SFU's offer, being applied.
      case applyingRemote
      case ready
    }

    let ref: StreamRef
    /// The participant whose media it carries (nil: this device's publisher, or the subscriber
    /// connection).
    let from: Peer?
    /// The single subscriber connection (20.9): everyone's media, renegotiated by each offer.
    var subscriber = false
    /// The subscriber connection: whose media its applied offer carries, by mid.
    var sections: [GroupStreamSection] = []
    /// The subscriber connection: the sections of `offer`.
    var offeredSections: [GroupStreamSection] = []
    var step = Step.making
    /// Remote candidates, until the SFU's description is applied.
    var remoteCandidates: [IceCandidate]? = []
    /// Local candidates (nil: gathering done), until our description has gone out.
    var localCandidates: [IceCandidate?]? = []
    /// Remote: the SFU's offer, applied once the connection exists (the subscriber's: once
    /// the one before it is answered).
    var offer: SessionDescription?
    /// Rule 3 for this connection (`IceRecovery`), kept across a fresh connection that
    /// replaces it.
    var recovery = IceRecovery.connecting
    /// Whether its connection restarts ICE in place (else a restart replaces it).
    var canRestartIce = true
    /// Publisher: the restart its next offer carries.
    var restart: GroupRestart?

    /// This device's own publisher (which offers; every other stream answers).
    var isPublisher: Bool { from == nil && !subscriber }

    /// The participants whose media it carries (none for the publisher).
    var carries: [Peer] { subscriber ? participants : (from.map { [$0] } ?? []) }

    /// Cancels its recovery timer, if one is armed.
    var cancelTimer: [Effect] { recovery.timer.map { [.cancel($0)] } ?? [] }

    /// The participants the subscriber connection carries, in the order of their first section.
    var participants: [Peer] {
      var seen: Set<Peer> = []
      return sections.map(\.from).filter { seen.insert($0).inserted }
    }
  }

  public static let publisherStream = "publisher"

  public let callId: CallID
  public let entry: GroupCall.Entry
  public let video: Bool
  /// Ask for one subscriber connection (20.9) when joining or creating.
  public let multistream: Bool
  /// Make the publisher's connection and offer while the create or join request is on its way,
  /// and send the offer as soon as `group-media` comes (protocol.md 20.2 still holds: the offer
  /// never goes out before it). With LiveKit the connection is closed unused.
  public let offersAhead: Bool
  /// The server's `group-media` for Janus came: the publisher's offer may go out.
  private var mediaGranted = false
  private let iceServers: [IceServer]
  /// Rule 3's figures, as for a 1:1 call.
  public let recoveryPolicy: IceRecovery.Policy
  var phase: Phase
  public private(set) var group: GroupCallState?
  public private(set) var isMuted = false
  /// The call's id as the server knows it, once created or joined (a room's live call may
  /// have another id than the one proposed).
  public private(set) var joinedAs: CallID?
  var streams: [String: Stream] = [:]
  private var generations = 0
  private var timerTokens = 0

  public init(
    callId: CallID, entry: GroupCall.Entry, video: Bool, iceServers: [IceServer], multistream: Bool = false,
    offersAhead: Bool = false, recoveryPolicy: IceRecovery.Policy = .init()
  ) {
    self.offersAhead = offersAhead
    self.recoveryPolicy = recoveryPolicy
    self.callId = callId
    self.entry = entry
    self.video = video
    self.multistream = multistream
    self.iceServers = iceServers
    if case .invited(let invite) = entry {
      phase = .ringing
      group = invite.group
    } else {
      phase = .joining
    }
  }

  public var state: GroupCall.State {
    switch phase {
    case .ringing: .ringing
    case .joining: .joining
    case .joined: .joined
    case .leaving(let shown): shown
    case .ended(let reason): .ended(reason)
    }
  }

  public var isEnded: Bool {
    if case .ended = phase { return true }
    return false
  }

  /// Whether `ref` is a stream this call still has.
  public func has(_ ref: StreamRef) -> Bool { streams[ref.id]?.ref == ref }

  // MARK: Transitions

  public mutating func handle(_ event: Event) -> [Effect] {
    if isEnded { return [] }
    switch event {
    case .start: return start()
    case .join:
      guard phase == .ringing else { return [] }
      return request(.groupJoin(.init(callId: callId, multistream: multistream))) + publisherAhead()
    case .decline:
      guard phase == .ringing else { return [] }
      return leave(with: .groupDecline(.init(callId: callId)))
    case .leave:
      switch phase {
      case .ringing: return leave(with: .groupDecline(.init(callId: callId)))
      case .joining, .joined: return leave(with: .groupLeave(.init(callId: callId)))
      case .leaving, .ended: return []
      }
    case .endForAll:
      return leave(with: .groupEnd(.init(callId: callId)))
    case .invite(let members):
      guard phase == .joined else { return [.notify(.error("cannot invite: this device is not in the call"))] }
      return [.ask(.groupInvite(.init(callId: callId, members: members)))]
    case .remove(let userId):
      guard phase == .joined else { return [.notify(.error("cannot remove: this device is not in the call"))] }
      return [.ask(.groupRemove(.init(callId: callId, userId: userId)))]
    case .asked(let reply):
      return asked(reply)
    case .askFailed(let why):
      return [.notify(.error(why))]
    case .setMuted(let muted):
      isMuted = muted
      guard let publisher = streams[Self.publisherStream], publisher.step != .making else { return [] }
      return [.setAudio(publisher.ref, !muted)]
    case .server(let message):
      guard message.callId == callId, case .group(let group) = message.routed else { return [] }
      return received(group)
    case .replied(let reply):
      return replied(reply)
    case .requestFailed(let why):
      return [.notify(.error(why))] + finish(nil)
    case .settled:
      return finish(nil)
    case .connectionMade(let ref, let restartable):
      return connectionMade(ref, canRestartIce: restartable)
    case .connectionFailed(let ref, let why):
      guard let stream = stream(ref) else { return [] }
      streams[ref.id] = nil
      return [.notify(.error(Self.failure(of: stream, why)))]
    case .descriptionCreated(let ref, let description):
      guard var stream = stream(ref), stream.step == .creating else { return [] }
      stream.step = .settingLocal(description)
      streams[ref.id] = stream
      return [.setLocal(ref, description, stream.isPublisher ? .offer : .answer)]
    case .localDescriptionSet(let ref):
      return localDescriptionSet(ref)
    case .remoteDescriptionSet(let ref):
      return remoteDescriptionSet(ref)
    case .descriptionFailed(let ref, let why):
      guard let stream = stream(ref) else { return [] }
      if stream.isPublisher, stream.step == .applyingRemote {
        return [.notify(.error("the SFU's answer was refused: \(why)"))]
      }
      return [.notify(.error(Self.failure(of: stream, why)))]
    case .localCandidate(let ref, let candidate):
      return localCandidate(ref, candidate)
    case .connectionState(let ref, let state):
      guard let stream = stream(ref) else { return [] }
      var notices: [Effect]
      if stream.subscriber {
        notices = stream.participants.map { .notify(.remoteStreamState(stream: ref.id, from: $0, state)) }
      } else if let from = stream.from {
        notices = [.notify(.remoteStreamState(stream: ref.id, from: from, state))]
      } else {
        notices = [.notify(.publisherState(state))]
      }
      return notices
        + recover(ref.id) { recovery, policy, token in recovery.changed(to: state, policy: policy, token: token) }
    case .timerFired(let token):
      guard let id = streams.first(where: { $0.value.recovery.timer == token })?.key else { return [] }
      return recover(id) { recovery, policy, next in recovery.fired(token, policy: policy, token: next) }
    case .networkChanged:
      guard phase == .joined else { return [] }
      // Those restarting already go on with their own attempt.
      return streams.keys.sorted().flatMap { id -> [Effect] in
        guard let stream = streams[id], stream.step != .making, stream.recovery.attempt == 0 else { return [] }
        return recover(id) { recovery, policy, token in
          recovery.cancelArmed + recovery.restart(attempt: 1, policy: policy, token: token)
        }
      }
    }
  }

  // MARK: Entering and leaving

  private mutating func start() -> [Effect] {
    switch entry {
    case .create(let members, let title):
      guard phase == .joining, joinedAs == nil else { return [] }
      return [prepare]
        + request(
          .groupCreate(
            .init(callId: callId, members: members, video: video, title: title, multistream: multistream)))
        + publisherAhead()
    case .invited:
      guard phase == .ringing else { return [] }
      return [prepare, .send(.groupRinging(.init(callId: callId)))]
    case .join:
      guard phase == .joining, joinedAs == nil else { return [] }
      return [prepare] + request(.groupJoin(.init(callId: callId, multistream: multistream))) + publisherAhead()
    case .joinedRoom(let state):
      guard phase == .joining else { return [] }
      group = state
      joinedAs = callId
      phase = .joined
      return [prepare, .notify(.participants(state)), .notify(.state(.joined))] + publisherAhead()
    }
  }

  /// With `offersAhead`, the publisher's connection is made now; its offer waits for
  /// `group-media`.
  private mutating func publisherAhead() -> [Effect] {
    guard offersAhead, streams[Self.publisherStream] == nil else { return [] }
    return makePublisher()
  }

  /// A fresh publisher connection; `restart` is what its offer says (a replaced one keeps its
  /// `recovery`).
  private mutating func makePublisher(restart: GroupRestart? = nil, recovery: IceRecovery = .connecting) -> [Effect] {
    var stream = Stream(ref: nextRef(Self.publisherStream), from: nil)
    stream.restart = restart
    stream.recovery = recovery
    streams[Self.publisherStream] = stream
    return [.makeConnection(stream.ref, publisherConfiguration)]
  }

  private var publisherConfiguration: PeerConnectionConfiguration {
    PeerConnectionConfiguration(iceServers: iceServers, video: video, sendOnly: true)
  }

  /// The connections a Janus call makes first (`mediaReady`, `subscriberOffer`): built ahead,
  /// their pipelines are ready when `group-media` and the first subscriber offer come (with
  /// LiveKit they stay unused).
  private var prepare: Effect {
    let publisher = publisherConfiguration
    let subscriber = PeerConnectionConfiguration(iceServers: iceServers, video: video, multistream: true)
    return .prepareConnections(multistream ? [publisher, subscriber] : [publisher])
  }

  /// Sends a create or join request; its answer decides.
  private mutating func request(_ message: ClientMessage) -> [Effect] {
    let shown = phase != .joining
    phase = .joining
    return (shown ? [.notify(.state(.joining))] : []) + [.request(message)]
  }

  private mutating func replied(_ reply: ServerMessage) -> [Effect] {
    guard phase == .joining else { return [] }
    switch reply.routed {
    case .session(.ack(let ack)):
      var effects: [Effect] = []
      if let group = ack.group {
        self.group = group
        effects.append(.notify(.participants(group)))
      }
      joinedAs = ack.callId ?? callId
      phase = .joined
      return effects + [.notify(.state(.joined))]
    case .session(.error(let error)):
      return [.notify(.error("\(error.code.rawValue): \(error.message)"))] + finish(nil)
    case .session(.welcome), .oneToOne, .group, .unknown:
      return [.notify(.error("unexpected answer \(reply.typeName)"))] + finish(nil)
    }
  }

  /// An invite's or remove's answer: the participants it changed, or why it was refused.
  private mutating func asked(_ reply: ServerMessage) -> [Effect] {
    switch reply.routed {
    case .session(.ack(let ack)):
      guard let group = ack.group, phase == .joined else { return [] }
      self.group = group
      return [.notify(.participants(group))]
    case .session(.error(let error)):
      return [.notify(.error("\(error.code.rawValue): \(error.message)"))]
    case .session(.welcome), .oneToOne, .group, .unknown:
      return [.notify(.error("unexpected answer \(reply.typeName)"))]
    }
  }

  private mutating func leave(with message: ClientMessage) -> [Effect] {
    if case .leaving = phase { return [] }
    phase = .leaving(shown: state)
    return [.settle(message)]
  }

  private mutating func finish(_ reason: GroupEndReason?) -> [Effect] {
    phase = .ended(reason)
    streams = [:]
    return [.finish(.ended(reason))]
  }

  // MARK: The server's messages

  /// The switch has no `default`: a new group message cannot be added without a decision here.
  private mutating func received(_ message: ServerMessage.GroupMessage) -> [Effect] {
    if case .leaving = phase {
      // Nothing but the end matters any more.
      if case .groupEnded(let m) = message { return finish(m.reason) }
      return []
    }
    switch message {
    case .groupInvite:
      return []  // a ring re-delivered: the call already exists
    case .groupUpdate(let m):
      group = m.group
      return [.notify(.participants(m.group))]
    case .groupMedia(let m):
      return mediaReady(m)
    case .groupAnswer(let m):
      guard var stream = streams[m.stream], stream.isPublisher, stream.step == .awaitingAnswer else { return [] }
      stream.step = .applyingRemote
      streams[m.stream] = stream
      return [.setRemote(stream.ref, SessionDescription(sdp: m.sdp), .answer)]
    case .groupOffer(let m) where m.restart != nil && streams[m.stream] != nil:
      return restartOffer(m)
    case .groupOffer(let m) where m.stream == GroupSubscription.stream:
      return subscriberOffer(m)
    case .groupOffer(let m):
      guard let from = m.from, streams[m.stream] == nil else { return [] }
      var stream = Stream(ref: nextRef(m.stream), from: from)
      stream.offer = SessionDescription(sdp: m.sdp)
      streams[m.stream] = stream
      return [
        .makeConnection(
          stream.ref, PeerConnectionConfiguration(iceServers: iceServers, video: video, remoteParticipant: from))
      ]
    case .groupCandidate(let m):
      guard var stream = streams[m.stream] else { return [] }
      guard var waiting = stream.remoteCandidates else { return [.addCandidate(stream.ref, m.candidate)] }
      waiting.append(m.candidate)
      stream.remoteCandidates = waiting
      streams[m.stream] = stream
      return []
    case .groupStreamEnded(let m):
      guard let stream = streams.removeValue(forKey: m.stream) else { return [] }
      let timer = stream.cancelTimer
      // A stream whose connection is still being made closes once it is (connectionMade).
      guard stream.step != .making else { return timer }
      let gone = stream.carries
      return timer + [.close(stream.ref)] + gone.map { .notify(.remoteStreamRemoved(stream: m.stream, from: $0)) }
    case .groupEnded(let m):
      return finish(m.reason)
    }
  }

  private mutating func mediaReady(_ media: ServerMessage.GroupMedia) -> [Effect] {
    switch media.sfu {
    case .livekit:
      // A publisher made ahead is not needed: LiveKit's own client publishes.
      var closed: [Effect] = []
      if let early = streams[Self.publisherStream], !mediaGranted {
        streams[Self.publisherStream] = nil
        // One still being made closes once it is (connectionMade).
        if early.step != .making { closed = [.close(early.ref)] }
      }
      guard let url = media.url, let token = media.token else {
        return closed + [.notify(.error("group-media for LiveKit without url and token"))]
      }
      return closed + [.notify(.liveKit(url: url, token: token))]
    case .janus:
      if media.restart == .connection, !streams.isEmpty {
        mediaGranted = true
        return mediaMoved()
      }
      guard !mediaGranted else { return [] }
      mediaGranted = true
      guard let stream = streams[Self.publisherStream] else { return makePublisher() }
      // Made ahead: its offer goes out now if it is ready, else once it is (localDescriptionSet).
      guard case .awaitingMedia(let offer) = stream.step else { return [] }
      return offerOut(stream, offer)
    }
  }

  /// The call's media moved to a fresh SFU room (another server node took the call over,
  /// protocol.md 20.11): every connection of the call is dead. The publisher is replaced by a
  /// fresh connection, whose offer says so (`restart: connection`); what this device received
  /// ends here, and the server offers it again as new streams.
  private mutating func mediaMoved() -> [Effect] {
    var effects: [Effect] = []
    let old = streams
    streams = [:]
    for (id, stream) in old.sorted(by: { $0.key < $1.key }) {
      effects += stream.cancelTimer
      // A connection still being made closes once it is (connectionMade).
      if stream.step != .making { effects.append(.close(stream.ref)) }
      effects += stream.carries.map { .notify(.remoteStreamRemoved(stream: id, from: $0)) }
    }
    return effects + makePublisher(restart: .connection)
  }

  // MARK: Each stream's negotiation

  private mutating func connectionMade(_ ref: StreamRef, canRestartIce: Bool) -> [Effect] {
    guard var stream = stream(ref), stream.step == .making else { return [.close(ref)] }  // it ended meanwhile
    stream.canRestartIce = canRestartIce
    if stream.subscriber {
      stream.step = .ready
      streams[ref.id] = stream
      return applyOffer(ref)
    }
    stream.step = stream.from == nil ? .creating : .applyingRemote
    var effects: [Effect]
    if let from = stream.from {
      effects = [.notify(.remoteStreamAdded(ref, from: from))]
      // A receive-only stream takes the offer's directions as they are.
      if let offer = stream.offer { effects.append(.setRemote(ref, offer, .offer)) }
      stream.offer = nil
    } else {
      effects = isMuted ? [.setAudio(ref, false)] : []
      if video {
        // A publisher only sends: the others' video comes on their own streams. (Without a
        // camera the engine made no video section: this does nothing.) Before the first offer:
        // webrtcbin 1.22 cannot change a negotiated direction.
        effects += [.setVideoDirection(ref, .sendonly), .setVideo(ref, true)]
      }
      effects.append(.createOffer(ref))
    }
    streams[ref.id] = stream
    return effects
  }

  private mutating func localDescriptionSet(_ ref: StreamRef) -> [Effect] {
    guard var stream = stream(ref), case .settingLocal(let description) = stream.step else { return [] }
    if stream.isPublisher {
      guard mediaGranted else {
        // Made ahead: the offer (and the candidates gathered meanwhile) wait for group-media.
        stream.step = .awaitingMedia(description)
        streams[ref.id] = stream
        return []
      }
      return offerOut(stream, description)
    }
    stream.step = .ready
    var effects: [Effect] = [.send(.groupAnswer(.init(callId: callId, stream: ref.id, sdp: description.sdp)))]
    // The candidates gathered meanwhile follow the description.
    effects += (stream.localCandidates ?? []).map { candidateMessage($0, ref) }
    stream.localCandidates = nil
    streams[ref.id] = stream
    // The next offer, if one came while this one was negotiated (the subscriber's, or a
    // restart's).
    return effects + applyOffer(ref)
  }

  /// The publisher's offer goes out, the candidates gathered meanwhile after it.
  private mutating func offerOut(_ publisher: Stream, _ offer: SessionDescription) -> [Effect] {
    var stream = publisher
    let ref = stream.ref
    stream.step = .awaitingAnswer
    var effects: [Effect] = [
      .send(.groupOffer(.init(callId: callId, stream: ref.id, sdp: offer.sdp, restart: stream.restart)))
    ]
    stream.restart = nil
    effects += (stream.localCandidates ?? []).map { candidateMessage($0, ref) }
    stream.localCandidates = nil
    streams[ref.id] = stream
    return effects
  }

  private mutating func remoteDescriptionSet(_ ref: StreamRef) -> [Effect] {
    guard var stream = stream(ref), stream.step == .applyingRemote else { return [] }
    var effects = (stream.remoteCandidates ?? []).map { Effect.addCandidate(ref, $0) }
    stream.remoteCandidates = nil
    if stream.isPublisher {
      stream.step = .ready
    } else {
      stream.step = .creating
      effects.append(.createAnswer(ref))
    }
    streams[ref.id] = stream
    return effects
  }

  private mutating func localCandidate(_ ref: StreamRef, _ candidate: IceCandidate?) -> [Effect] {
    guard var stream = stream(ref) else { return [] }
    guard var held = stream.localCandidates else { return [candidateMessage(candidate, ref)] }
    held.append(candidate)
    stream.localCandidates = held
    streams[ref.id] = stream
    return []
  }

  private func candidateMessage(_ candidate: IceCandidate?, _ ref: StreamRef) -> Effect {
    guard let candidate else { return .send(.groupEndOfCandidates(.init(callId: callId, stream: ref.id))) }
    return .send(.groupCandidate(.init(callId: callId, stream: ref.id, candidate: candidate)))
  }

  private func stream(_ ref: StreamRef) -> Stream? {
    guard let stream = streams[ref.id], stream.ref == ref else { return nil }
    return stream
  }

  private mutating func nextRef(_ id: String) -> StreamRef {
    generations += 1
    return StreamRef(id: id, generation: generations)
  }

  // MARK: The subscriber connection (20.9)

  /// An offer of the single subscriber connection: the first makes the connection, each later
  /// one renegotiates it (applied once the one before is answered; the server sends none before
  /// that, and only the latest counts if it did).
  private mutating func subscriberOffer(_ m: ServerMessage.GroupDescription) -> [Effect] {
    let offer = SessionDescription(sdp: m.sdp)
    let sections = m.streams ?? []
    if var stream = streams[m.stream] {
      guard stream.subscriber else { return [] }
      stream.offer = offer
      stream.offeredSections = sections
      streams[m.stream] = stream
      return stream.step == .ready ? applyOffer(stream.ref) : []
    }
    var stream = Stream(ref: nextRef(m.stream), from: nil)
    stream.subscriber = true
    stream.offer = offer
    stream.offeredSections = sections
    streams[m.stream] = stream
    return [
      .makeConnection(stream.ref, PeerConnectionConfiguration(iceServers: iceServers, video: video, multistream: true))
    ]
  }

  /// Applies a stream's waiting offer, if any. The subscriber's: the engine learns the new
  /// sections first, the app the participants that came and went.
  private mutating func applyOffer(_ ref: StreamRef) -> [Effect] {
    guard var stream = stream(ref), stream.step == .ready, let offer = stream.offer else { return [] }
    // Its candidates of the new ICE generation (a restart) follow the answer.
    stream.localCandidates = stream.localCandidates ?? []
    guard stream.subscriber else {
      // A feed's connection: only a restart offers it again (20.10).
      stream.offer = nil
      stream.step = .applyingRemote
      streams[ref.id] = stream
      return [.setRemote(ref, offer, .offer)]
    }
    let before = stream.participants
    stream.offer = nil
    stream.sections = stream.offeredSections
    stream.step = .applyingRemote
    streams[ref.id] = stream
    let after = stream.participants
    return [.setRemoteSections(ref, stream.sections)]
      + before.filter { !after.contains($0) }.map { .notify(.remoteStreamRemoved(stream: ref.id, from: $0)) }
      + after.filter { !before.contains($0) }.map { .notify(.remoteStreamAdded(ref, from: $0)) }
      + [.setRemote(ref, offer, .offer)]
  }

  // MARK: Recovery (rule 3, per connection)

  /// Runs one of `IceRecovery`'s transitions on stream `id` and what its actions mean here.
  private mutating func recover(
    _ id: String,
    _ transition: (inout IceRecovery, IceRecovery.Policy, () -> Int) -> [IceRecovery.Action]
  ) -> [Effect] {
    guard phase == .joined, var stream = streams[id] else { return [] }
    var tokens = timerTokens
    let actions = transition(&stream.recovery, recoveryPolicy) {
      tokens += 1
      return tokens
    }
    timerTokens = tokens
    streams[id] = stream
    var effects: [Effect] = []
    for action in actions {
      switch action {
      case .arm(let token, let delay): effects.append(.arm(token, after: delay))
      case .cancel(let token): effects.append(.cancel(token))
      case .restart: effects += restartNow(id)
      case .giveUp:
        // This device cannot get that media back: it leaves rather than stay in silence.
        guard let stream = streams[id] else { continue }
        return effects + [.notify(.error(Self.failure(of: stream, "its connection could not be restored")))]
          + handle(.leave)
      }
    }
    return effects
  }

  /// Restarts stream `id` (its timeout is armed): the publisher offers again, with new ICE
  /// credentials or from a fresh connection; a stream the SFU offered asks the server for a new
  /// offer (`group-restart`).
  private mutating func restartNow(_ id: String) -> [Effect] {
    guard var stream = streams[id] else { return [] }
    let kind: GroupRestart = stream.canRestartIce ? .ice : .connection
    guard stream.isPublisher else { return [.send(.groupRestart(.init(callId: callId, stream: id, restart: kind)))] }
    if kind == .ice {
      // While its offer or answer is being made the timeout decides; an offer the SFU did not
      // answer is replaced.
      guard stream.step == .ready || stream.step == .awaitingAnswer else { return [] }
      stream.step = .creating
      stream.restart = .ice
      stream.localCandidates = []
      stream.remoteCandidates = []
      streams[id] = stream
      return [.createRestartOffer(stream.ref)]
    }
    return [.close(stream.ref)] + makePublisher(restart: .connection, recovery: stream.recovery)
  }

  /// The server's offer restarting a stream it offered before (the answer to `group-restart`,
  /// or its own): new ICE credentials for the stream's connection, or a fresh connection.
  private mutating func restartOffer(_ m: ServerMessage.GroupDescription) -> [Effect] {
    guard var stream = streams[m.stream], !stream.isPublisher else { return [] }
    let offer = SessionDescription(sdp: m.sdp)
    if m.restart == .ice {
      // The same connection: applied like any offer once the one before is answered.
      stream.offer = offer
      if stream.subscriber { stream.offeredSections = m.streams ?? stream.offeredSections }
      stream.remoteCandidates = stream.remoteCandidates ?? []
      guard stream.step == .ready else {
        streams[m.stream] = stream
        return []
      }
      streams[m.stream] = stream
      return applyOffer(stream.ref)
    }
    // A fresh connection replaces the stream's: its participants are added again on it.
    var fresh = Stream(ref: nextRef(m.stream), from: stream.subscriber ? nil : (m.from ?? stream.from))
    fresh.subscriber = stream.subscriber
    fresh.recovery = stream.recovery
    fresh.offer = offer
    fresh.offeredSections = m.streams ?? []
    streams[m.stream] = fresh
    let gone = stream.carries
    var effects: [Effect] = stream.step == .making ? [] : [.close(stream.ref)]
    effects += gone.map { .notify(.remoteStreamRemoved(stream: m.stream, from: $0)) }
    let configuration =
      fresh.subscriber
      ? PeerConnectionConfiguration(iceServers: iceServers, video: video, multistream: true)
      : PeerConnectionConfiguration(iceServers: iceServers, video: video, remoteParticipant: fresh.from)
    return effects + [.makeConnection(fresh.ref, configuration)]
  }

  private static func failure(of stream: Stream, _ why: String) -> String {
    if stream.subscriber { return "could not receive the others: \(why)" }
    guard let from = stream.from else { return "could not publish: \(why)" }
    return "could not receive \(from.userId): \(why)"
  }
}
