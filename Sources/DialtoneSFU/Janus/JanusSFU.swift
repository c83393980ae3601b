import DialtoneCalls
import DialtoneCrypto
import DialtoneHTTPClient
import DialtoneJSON
import DialtoneProtocol
import DialtoneSupport
import Foundation

/// Group calls through Janus's VideoRoom plugin, proxied: `dialtone-server` is Janus's only
/// client. Each call gets a private room (random id, secret and pin nobody else knows); each
/// joined device a publisher handle, and either one subscriber handle per other participant's
/// feed (one stream per connection: protocol.md 20.2) or, for a device that asked for it, one
/// multistream subscriber handle whose subscription grows and shrinks (`JanusSubscriber`,
/// 20.9). The participant's JSEP and candidates are relayed between its signaling socket and
/// Janus.
///
/// Commands run in order per call (a chain of tasks per call id), calls independently.
package actor JanusSFU: SFUBackend {
  package struct Settings: Sendable {
    /// Janus's HTTP API, e.g. http://127.0.0.1:8088/janus (loopback only: see docs/deploy.md).
    package var url: String
    package var apiSecret: String?
    /// VideoRoom's `admin_key`, when Janus requires one to create rooms.
    package var adminKey: String?
    /// Janus's HTTP requests (POST) time out after this many seconds.
    package var requestTimeout: Double = 10

    package init(url: String, apiSecret: String?, adminKey: String?, requestTimeout: Double = 10) {
      self.url = url
      self.apiSecret = apiSecret
      self.adminKey = adminKey
      self.requestTimeout = requestTimeout
    }
  }

  private struct Subscription {
    package let handle: UInt64
    package let stream: String
  }

  private struct Participant {
    package let identity: Identity
    package let feed: UInt64
    package let handle: UInt64
    package var published = false
    /// Janus took an offer of the publisher (a restart of one never configured has nothing to
    /// hang up: a device joined again in a room made by a node that took the call over).
    package var configured = false
    /// Keyed by the publisher whose feed the subscription receives.
    package var subscriptions: [Identity: Subscription] = [:]
    /// The device receives everyone on one subscriber connection (20.9).
    package var multistream = false
    package var subscriber = JanusSubscriber()
    /// The sections the single subscriber connection's latest offer listed (an ICE restart's
    /// offer, whose reply has no `streams` summary, carries the same).
    package var subscriberSections: [GroupStreamSection] = []

    /// Every Janus handle of the device.
    package var handles: [UInt64] {
      [handle] + subscriptions.values.map(\.handle) + (subscriber.handle.map { [$0] } ?? [])
    }
  }

  private struct Room {
    package let number: UInt64
    package let secret: String
    package let pin: String
    package let video: Bool
    package var participants: [Identity: Participant] = [:]
    /// The room's dummy publisher (an Opus feed that sends nothing): a single subscriber
    /// connection subscribes to it while nobody else publishes, so its ICE and DTLS are done
    /// before the first real feed arrives (then one renegotiation, on the same m-line).
    package var placeholder: UInt64?
  }

  /// What a Janus handle belongs to (for the events Janus sends about it).
  private struct HandleOwner {
    package let callId: CallID
    package let participant: Identity
    package let stream: String
  }

  package nonisolated let kind = SFUKind.janus
  private static let publisherStream = "publisher"
  private static let subscriberStream = GroupSubscription.stream
  /// VideoRoom's JANUS_VIDEOROOM_ERROR_NO_SUCH_FEED.
  private static let noSuchFeed = 428

  private let settings: Settings
  private let http: HTTPClient
  private let log: Log
  private let inbox: AsyncStream<SFUCommand>
  private let inboxSink: AsyncStream<SFUCommand>.Continuation
  private var emit: @Sendable (SFUEvent) -> Void = { _ in }
  private var session: JanusSession?
  /// The handle that creates and destroys rooms.
  private var manager: UInt64?
  private var rooms: [CallID: Room] = [:]
  private var owners: [UInt64: HandleOwner] = [:]
  /// Work in order, in three levels: the room (open, close), each participant (join, leave),
  /// and each of a participant's streams (its offer or answer, then its candidates). Each level
  /// starts after the one above as it stood; close waits for everything before it. So a
  /// subscriber's answer reaches Janus while the same device's publisher is still being
  /// configured: Janus's ICE agent for the stream is ready before the device's checks give up
  /// their first attempt.
  private var chains: [ChainKey: Task<Void, Never>] = [:]
  /// Subscriptions being made (subscriber, publisher), so one pair never gets two handles.
  private var subscribing: Set<[Identity]> = []
  /// Subscriptions run beside the call's chain: a join must not wait for the N-1 feeds before it.
  private var subscriptions: [CallID: [Task<Void, Never>]] = [:]
  private var pump: Task<Void, Never>?
  /// Publisher handles being replaced (`unpublish`), until Janus reports their old
  /// PeerConnection hung up (its `hangup` event) or the wait times out.
  private var hangups: [UInt64: HangupWait] = [:]
  /// How long a replaced publisher waits for Janus to hang its old PeerConnection up.
  private static let hangupWait: Duration = .seconds(2)

  private enum HangupWait {
    /// Asked to unpublish; Janus has not hung up yet and nobody waits yet.
    case asked
    /// Janus hung up before anyone waited.
    case hungUp
    /// `unpublish` waits, with the timer that ends the wait if Janus never hangs up.
    case waiting(CheckedContinuation<Bool, Never>, timer: Task<Void, Never>)
  }

  package init(settings: Settings, log: Log) {
    self.settings = settings
    self.log = log
    // Janus's HTTP transport is HTTP/1.1; the long poll holds one connection.
    http = HTTPClient(configuration: .init(maxConnectionsPerHost: 16, http2: false))
    (inbox, inboxSink) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
  }

  package func start(events: @escaping @Sendable (SFUEvent) -> Void) async throws {
    emit = events
    pump = Task { [inbox] in
      for await command in inbox { self.schedule(command) }
    }
    do {
      _ = try await connectedSession()
      log.info("Janus session open at \(settings.url)")
    } catch {
      // Not fatal: the next group call tries again, and fails clearly if Janus is still away.
      log.warning("Janus is not reachable at \(settings.url) yet: \(error)")
    }
  }

  package nonisolated func perform(_ command: SFUCommand) { inboxSink.yield(command) }

  package func shutdown() async {
    // The server is stopping: what closing its rooms leads to (streams ended, a request failing
    // on a handle already detached) must not end any call. Its calls go on after a restart, or
    // on the node that takes them over (protocol.md 20.11).
    emit = { _ in }
    inboxSink.finish()
    pump?.cancel()
    for chain in chains.values { await chain.value }
    for task in subscriptions.values.joined() { await task.value }
    for (callId, _) in rooms { await close(callId) }
    await session?.close()
    http.shutdown()
  }

  // MARK: - Ordering

  /// The room's work (participant nil), one participant's (stream nil), or one of its streams'.
  private struct ChainKey: Hashable {
    package let callId: CallID
    package var participant: Identity? = nil
    package var stream: String? = nil

    package var parent: ChainKey? {
      if stream != nil { return ChainKey(callId: callId, participant: participant) }
      if participant != nil { return ChainKey(callId: callId) }
      return nil
    }
  }

  private func schedule(_ command: SFUCommand) {
    switch command {
    case .open(let callId, _):
      enqueue(ChainKey(callId: callId)) { await self.run(command) }
    case .close(let callId):
      // After everything already asked of the call.
      let pending = chains.filter { $0.key.callId == callId && $0.key.participant != nil }.map(\.value)
      enqueue(ChainKey(callId: callId)) {
        for task in pending { await task.value }
        await self.run(command)
      }
    case .join(let callId, let who, _), .rejoin(let callId, let who, _):
      enqueue(ChainKey(callId: callId, participant: who)) { await self.run(command) }
    case .leave(let callId, let who):
      let streams = chains.filter { $0.key.callId == callId && $0.key.participant == who && $0.key.stream != nil }
        .map(\.value)
      enqueue(ChainKey(callId: callId, participant: who)) {
        for task in streams { await task.value }
        await self.run(command)
      }
    case .signal(let callId, let who, let message):
      enqueue(ChainKey(callId: callId, participant: who, stream: Self.stream(of: message))) {
        await self.run(command)
      }
    }
  }

  private static func stream(of message: ClientMessage) -> String {
    switch message {
    case .groupOffer(let m), .groupAnswer(let m): return m.stream
    case .groupCandidate(let m): return m.stream
    case .groupEndOfCandidates(let m): return m.stream
    case .groupRestart(let m): return m.stream
    default: return publisherStream
    }
  }

  /// Work also waits for the chain above it as it stands (the room's creation, the join).
  private func enqueue(_ key: ChainKey, _ work: @escaping @Sendable () async -> Void) {
    let previous = chains[key]
    let above = key.parent.flatMap { chains[$0] }
    chains[key] = Task {
      await previous?.value
      await above?.value
      await work()
    }
  }

  private func run(_ command: SFUCommand) async {
    do {
      switch command {
      case .open(let callId, let video): try await open(callId, video: video)
      case .join(let callId, let who, let multistream): try await join(callId, who, multistream: multistream)
      case .rejoin(let callId, let who, let multistream):
        try await join(callId, who, multistream: multistream, restart: .connection)
      case .leave(let callId, let who): await leave(callId, who)
      case .close(let callId):
        for task in subscriptions.removeValue(forKey: callId) ?? [] { await task.value }
        await close(callId)
        for key in chains.keys where key.callId == callId { chains[key] = nil }
      case .signal(let callId, let who, let message): try await signal(callId, who, message)
      }
    } catch {
      fail(command, error)
    }
  }

  private func fail(_ command: SFUCommand, _ error: any Error) {
    let callId = command.callId
    // A call without a room failed already and was forgotten, unless the room never came to be.
    if case .open = command {} else if rooms[callId] == nil { return }
    log.error("group call \(callId): \(error)", callId: callId)
    forget(callId)
    emit(.callFailed(callId: callId, reason: "\(error)"))
  }

  // MARK: - Commands

  private func open(_ callId: CallID, video: Bool) async throws {
    let session = try await connectedSession()
    guard let manager else { throw JanusError.sessionLost("no manager handle") }
    let room = Room(
      number: Self.randomID(), secret: SecureRandom.token(byteCount: 18), pin: SecureRandom.token(byteCount: 18),
      video: video)
    let request = Self.createRequest(
      room: room.number, secret: room.secret, pin: room.pin, video: room.video, adminKey: settings.adminKey)
    let reply = try await session.message(manager, request)
    guard reply.data["videoroom"]?.stringValue == "created" else {
      throw JanusError.protocolViolation("create room: \(reply.data.serializedString)")
    }
    rooms[callId] = room
    // Not fatal without it: a single subscriber connection then starts with the first feed.
    let listed = try? await session.message(manager, ["request": "listparticipants", "room": .int(Int64(room.number))])
    rooms[callId]?.placeholder = JanusSubscriber.placeholder(in: listed?.data)
  }

  /// The video cap Janus asks each publisher of a video call for (REMB): every participant
  /// receives all the others' video, so a call of N sends N-1 streams to each device.
  package static let videoBitrate = 600_000

  /// VideoRoom's `create` for a call's private room. Video is VP8 only: Janus forwards what
  /// each publisher sends without transcoding, and VP8 is the codec every Dialtone engine
  /// encodes and decodes (the GStreamer engine has no other), so every subscriber can decode
  /// every publisher.
  package static func createRequest(room: UInt64, secret: String, pin: String, video: Bool, adminKey: String?)
    -> JSONValue
  {
    var request: [String: JSONValue] = [
      "request": "create", "room": .int(Int64(room)), "secret": .string(secret), "pin": .string(pin),
      "is_private": true, "permanent": false,
      // Every member, and the placeholder.
      "publishers": .int(Int64(Limits.maxGroupMembers + 1)),
      "audiocodec": "opus", "videocodec": "vp8", "notify_joining": false,
      // A placeholder feed for single subscriber connections (JanusSubscriber).
      "dummy_publisher": true, "dummy_streams": [["codec": "opus"]],
    ]
    if video { request["bitrate"] = .int(Int64(videoBitrate)) }
    if let adminKey { request["admin_key"] = .string(adminKey) }
    return .object(request)
  }

  /// `restart`: the device is in the call already, on connections to a room that is gone (the
  /// call's former node made it): `group-media` tells it to publish from a fresh connection and
  /// drop what it received (20.11).
  private func join(_ callId: CallID, _ who: Identity, multistream: Bool, restart: GroupRestart? = nil) async throws {
    guard let room = rooms[callId] else { return }  // the call failed already
    if room.participants[who] != nil { await leave(callId, who) }  // a stale join of the same device
    let session = try await connectedSession()
    let handle = try await session.attach()
    let feed = Self.randomID()
    owners[handle] = HandleOwner(callId: callId, participant: who, stream: Self.publisherStream)
    let reply = try await session.message(
      handle,
      [
        "request": "join", "ptype": "publisher", "room": .int(Int64(room.number)), "pin": .string(room.pin),
        "id": .int(Int64(feed)), "display": .string(who.userId + "/" + who.deviceId),
      ])
    guard reply.data["videoroom"]?.stringValue == "joined" else {
      throw JanusError.protocolViolation("join: \(reply.data.serializedString)")
    }
    var participant = Participant(identity: who, feed: feed, handle: handle)
    participant.multistream = multistream
    participant.subscriber = JanusSubscriber(placeholder: room.placeholder)
    rooms[callId]?.participants[who] = participant
    log.debug("group call \(callId): \(who.userId) joined Janus", callId: callId)
    emit(
      .send(
        .groupMedia(.init(callId: callId, sfu: .janus, multistream: multistream, restart: restart)), callId: callId,
        to: who))
    // Everyone already publishing is offered to the newcomer.
    let publishing = rooms[callId]?.participants.values.filter { $0.identity != who && $0.published } ?? []
    for other in publishing { offer(other, to: who, in: callId) }
    // Nobody publishes yet: the single subscriber connection starts on the placeholder.
    if multistream, publishing.isEmpty, let request = rooms[callId]?.participants[who]?.subscriber.start() {
      send(request, for: who, in: callId)
    }
  }

  private func signal(_ callId: CallID, _ who: Identity, _ message: ClientMessage) async throws {
    guard let participant = rooms[callId]?.participants[who], let session else { return }
    switch message {
    case .groupOffer(let m):
      guard m.stream == Self.publisherStream else { return refuse(callId, who, "only the publisher stream is offered") }
      // A fresh connection replaces the publisher's: the old one is hung up first (Janus keeps
      // a handle's DTLS across an offer), and the feed is offered to everyone again once its
      // media is up.
      if m.restart == .connection, participant.configured { await unpublish(callId, who) }
      let video = rooms[callId]?.video ?? false
      let reply = try await session.message(
        participant.handle, ["request": "configure", "audio": true, "video": .bool(video)],
        jsep: ["type": "offer", "sdp": .string(m.sdp)])
      rooms[callId]?.participants[who]?.configured = true
      guard let sdp = reply.jsep?["sdp"]?.stringValue else {
        throw JanusError.protocolViolation("configure: no answer")
      }
      // The others subscribe once Janus reports the feed's media up (`webrtcup`): before
      // that, a subscription to it is refused with "No such feed".
      log.debug("group call \(callId): Janus answered \(who.userId)'s publisher", callId: callId)
      emit(.send(.groupAnswer(.init(callId: callId, stream: m.stream, sdp: sdp)), callId: callId, to: who))
    case .groupAnswer(let m):
      guard m.stream != Self.publisherStream, let handle = handle(of: participant, stream: m.stream) else {
        return refuse(callId, who, "no stream \(m.stream) was offered")
      }
      // Only the offer out is answered (an answer Janus does not expect would fail the call).
      if m.stream == Self.subscriberStream, participant.subscriber.negotiation != .awaitingAnswer {
        return refuse(callId, who, "no subscriber offer is waiting for an answer")
      }
      _ = try await session.message(handle, ["request": "start"], jsep: ["type": "answer", "sdp": .string(m.sdp)])
      log.debug("group call \(callId): Janus took \(who.userId)'s answer for \(m.stream)", callId: callId)
      // The single subscriber connection's next change, held back until this answer.
      if m.stream == Self.subscriberStream, let next = rooms[callId]?.participants[who]?.subscriber.answered() {
        send(next, for: who, in: callId)
      }
    case .groupCandidate(let m):
      guard let handle = handle(of: participant, stream: m.stream) else { return }
      var candidate: [String: JSONValue] = ["candidate": .string(m.candidate.candidate)]
      if let mid = m.candidate.sdpMid { candidate["sdpMid"] = .string(mid) }
      if let index = m.candidate.sdpMLineIndex { candidate["sdpMLineIndex"] = .int(Int64(index)) }
      try await session.trickle(handle, .object(candidate))
    case .groupEndOfCandidates(let m):
      guard let handle = handle(of: participant, stream: m.stream) else { return }
      try await session.trickle(handle, ["completed": true])
    case .groupRestart(let m):
      try await restart(m, of: participant, in: callId)
    default:
      return
    }
  }

  /// The device restarts a stream the server offered (protocol.md 20.10). The single subscriber
  /// connection restarts at its next turn (`JanusSubscriber`); a feed's own connection gets new
  /// ICE credentials (`configure` with `restart`) or a new subscription on a fresh connection.
  private func restart(_ m: ClientMessage.GroupStreamRestart, of participant: Participant, in callId: CallID)
    async throws
  {
    let who = participant.identity
    if m.stream == Self.subscriberStream {
      guard participant.multistream else { return refuse(callId, who, "no subscriber stream to restart") }
      if let request = rooms[callId]?.participants[who]?.subscriber.restart(m.restart) {
        send(request, for: who, in: callId)
      }
      return
    }
    guard let (publisher, subscription) = participant.subscriptions.first(where: { $0.value.stream == m.stream }),
      let session
    else { return refuse(callId, who, "no stream \(m.stream) to restart") }
    switch m.restart {
    case .ice:
      let reply = try await session.message(subscription.handle, JanusSubscriber.restartRequest)
      guard let sdp = reply.jsep?["sdp"]?.stringValue else {
        throw JanusError.protocolViolation("restart: no offer in \(reply.data.serializedString)")
      }
      guard rooms[callId]?.participants[who]?.subscriptions[publisher]?.handle == subscription.handle else { return }
      emit(
        .send(
          .groupOffer(.init(callId: callId, stream: m.stream, sdp: sdp, from: publisher.peer, restart: .ice)),
          callId: callId, to: who))
    case .connection:
      let pair = [who, publisher]
      guard subscribing.insert(pair).inserted else { return }  // a subscription is being made already
      defer { subscribing.remove(pair) }
      rooms[callId]?.participants[who]?.subscriptions[publisher] = nil
      owners[subscription.handle] = nil
      await session.detach(subscription.handle)
      do {
        try await subscribe(callId, who, to: publisher, restart: .connection)
      } catch JanusError.plugin(code: Self.noSuchFeed, _) {
        // Its publisher left, or is publishing afresh: its stream ends, and comes again if so.
        emit(.send(.groupStreamEnded(.init(callId: callId, stream: m.stream)), callId: callId, to: who))
      }
    }
  }

  /// The publisher's connection is being replaced: Janus hangs the old one up (which ends every
  /// subscription to its feed), and every other device's stream of it ends until the new one's
  /// media is up (`published`, on `webrtcup`, offers it again).
  private func unpublish(_ callId: CallID, _ who: Identity) async {
    guard let participant = rooms[callId]?.participants[who], let session else { return }
    rooms[callId]?.participants[who]?.published = false
    hangups[participant.handle] = .asked
    defer { hangups[participant.handle] = nil }
    do {
      _ = try await session.message(participant.handle, ["request": "unpublish"])
      // Janus closes the PeerConnection a moment after it answers: an offer that came before
      // would be taken for a renegotiation of the dying one (and die with it).
      if await !hungUp(participant.handle) {
        log.warning("group call \(callId): Janus did not hang up \(who.userId)'s old publisher in time", callId: callId)
      }
    } catch {
      // Janus hung the connection up itself already (its ICE failed): nothing to unpublish.
      log.info("group call \(callId): \(who.userId)'s publisher was not published: \(error)", callId: callId)
    }
    for other in (rooms[callId].map { Array($0.participants.keys) } ?? []) where other != who {
      if let request = rooms[callId]?.participants[other]?.subscriber.publisherGone(participant.feed) {
        send(request, for: other, in: callId)
      }
      guard let subscription = rooms[callId]?.participants[other]?.subscriptions.removeValue(forKey: who) else {
        continue
      }
      owners[subscription.handle] = nil
      await session.detach(subscription.handle)
      emit(.send(.groupStreamEnded(.init(callId: callId, stream: subscription.stream)), callId: callId, to: other))
    }
  }

  /// Waits for Janus's `hangup` of a handle being unpublished: true when it came, false when
  /// `hangupWait` passed first.
  private func hungUp(_ handle: UInt64) async -> Bool {
    switch hangups[handle] {
    case .asked: break
    case .hungUp: return true
    case .waiting, nil: return false
    }
    return await withCheckedContinuation { continuation in
      let timer = Task { [weak self] in
        try? await Task.sleep(for: Self.hangupWait)
        guard !Task.isCancelled else { return }
        await self?.endHangupWait(handle, hungUp: false)
      }
      hangups[handle] = .waiting(continuation, timer: timer)
    }
  }

  private func endHangupWait(_ handle: UInt64, hungUp: Bool) {
    switch hangups[handle] {
    case .waiting(let continuation, let timer):
      timer.cancel()
      hangups[handle] = hungUp ? .hungUp : .asked
      continuation.resume(returning: hungUp)
    case .asked where hungUp:
      hangups[handle] = .hungUp
    default:
      return
    }
  }

  /// A publisher's media is up: everyone else is offered its feed.
  private func published(_ callId: CallID, _ who: Identity) async throws {
    guard let participant = rooms[callId]?.participants[who], !participant.published else { return }
    rooms[callId]?.participants[who]?.published = true
    for other in (rooms[callId]?.participants.keys.filter { $0 != who } ?? []) {
      offer(participant, to: other, in: callId)
    }
  }

  /// Takes a device out of the room: its media stops both ways at once. Janus is told to kick
  /// the participant (which tears its publisher down even if a detach below fails or is slow),
  /// then every handle of the device is detached, and everyone who received its feed is told that
  /// stream ended. A room being destroyed (`kicking: false`) loses everyone with it anyway.
  private func leave(_ callId: CallID, _ who: Identity, kicking: Bool = true) async {
    guard let room = rooms[callId], let participant = rooms[callId]?.participants.removeValue(forKey: who) else {
      return
    }
    if kicking { await kick(participant.feed, from: room, of: callId) }
    var handles = participant.handles
    let others = rooms[callId].map { Array($0.participants.keys) } ?? []
    for other in others {
      // On a single subscriber connection its sections go inactive (a renegotiation).
      if let request = rooms[callId]?.participants[other]?.subscriber.publisherGone(participant.feed) {
        send(request, for: other, in: callId)
      }
      guard let subscription = rooms[callId]?.participants[other]?.subscriptions.removeValue(forKey: who) else {
        continue
      }
      handles.append(subscription.handle)
      emit(.send(.groupStreamEnded(.init(callId: callId, stream: subscription.stream)), callId: callId, to: other))
    }
    for handle in handles {
      owners[handle] = nil
      await session?.detach(handle)
    }
  }

  private func close(_ callId: CallID) async {
    guard let room = rooms[callId] else { return }
    for who in room.participants.keys { await leave(callId, who, kicking: false) }
    rooms[callId] = nil
    await destroy(room, of: callId)
  }

  /// VideoRoom's `kick`: the participant is removed from the room and its PeerConnections hung
  /// up. One that is gone already (JANUS_VIDEOROOM_ERROR_NO_SUCH_FEED) is what was wanted.
  private func kick(_ feed: UInt64, from room: Room, of callId: CallID) async {
    guard let session, let manager else { return }
    do {
      _ = try await session.message(manager, Self.kickRequest(room: room.number, secret: room.secret, feed: feed))
    } catch JanusError.plugin(code: Self.noSuchFeed, _) {
      return
    } catch {
      log.warning("group call \(callId): Janus did not kick a participant: \(error)", callId: callId)
    }
  }

  package static func kickRequest(room: UInt64, secret: String, feed: UInt64) -> JSONValue {
    ["request": "kick", "room": .int(Int64(room)), "secret": .string(secret), "id": .int(Int64(feed))]
  }

  /// Destroys a room on Janus (with the session it was made on gone, there is nothing to destroy).
  private func destroy(_ room: Room, of callId: CallID) async {
    guard let session, let manager else { return }
    var request: [String: JSONValue] = [
      "request": "destroy", "room": .int(Int64(room.number)), "secret": .string(room.secret),
    ]
    if let adminKey = settings.adminKey { request["admin_key"] = .string(adminKey) }
    do {
      _ = try await session.message(manager, .object(request))
    } catch {
      log.warning("group call \(callId): Janus did not destroy its room: \(error)", callId: callId)
    }
  }

  // MARK: - Helpers

  /// `publisher`'s feed for `subscriber`: on its single subscriber connection, or on a
  /// connection of its own.
  private func offer(_ publisher: Participant, to subscriber: Identity, in callId: CallID) {
    guard let receiver = rooms[callId]?.participants[subscriber] else { return }
    guard receiver.multistream else { return startSubscription(callId, subscriber, to: publisher.identity) }
    guard let request = rooms[callId]?.participants[subscriber]?.subscriber.want(publisher.feed) else {
      log.debug(
        "group call \(callId): \(publisher.identity.userId)'s feed waits for \(subscriber.userId)'s subscriber",
        callId: callId)
      return
    }
    send(request, for: subscriber, in: callId)
  }

  /// Runs one request of a single subscriber connection beside the call's chain (a join must not
  /// wait for it); the changes that came meanwhile follow in one request when it is done.
  private func send(_ request: JanusSubscriber.Request, for subscriber: Identity, in callId: CallID) {
    guard let joined = rooms[callId]?.participants[subscriber]?.feed else { return }
    log.debug("group call \(callId): \(subscriber.userId)'s subscriber: \(request)", callId: callId)
    let task = Task { await self.perform(request, for: subscriber, joinedAs: joined, in: callId) }
    subscriptions[callId, default: []].append(task)
  }

  private func perform(
    _ request: JanusSubscriber.Request, for who: Identity, joinedAs feed: UInt64, in callId: CallID
  ) async {
    guard let room = rooms[callId], let session else { return }
    var attached: UInt64?
    let next: JanusSubscriber.Request?
    do {
      let reply: JanusSession.Reply
      switch request {
      case .join(let feeds), .replace(let feeds):
        // A replacement joins a fresh handle as the first join does; the old one goes below.
        let handle = try await session.attach()
        attached = handle
        owners[handle] = HandleOwner(callId: callId, participant: who, stream: Self.subscriberStream)
        reply = try await session.message(
          handle, JanusSubscriber.joinRequest(room: room.number, pin: room.pin, feeds: feeds))
      case .update(let feeds, let mids):
        guard let handle = rooms[callId]?.participants[who]?.subscriber.handle else { return }
        reply = try await session.message(handle, JanusSubscriber.updateRequest(subscribe: feeds, unsubscribe: mids))
      case .restartIce:
        guard let handle = rooms[callId]?.participants[who]?.subscriber.handle else { return }
        reply = try await session.message(handle, JanusSubscriber.restartRequest)
      }
      // The device may have left (or left and joined again) while Janus answered.
      guard rooms[callId]?.participants[who]?.feed == feed else { return await drop(attached) }
      if case .replace = request, let old = rooms[callId]?.participants[who]?.subscriber.handle {
        owners[old] = nil
        await session.detach(old)
      }
      let offered = forwardOffer(
        reply.jsep, summary: reply.data["streams"], restart: request.restart, to: who, in: callId)
      next = rooms[callId]?.participants[who]?.subscriber.completed(
        handle: attached, sections: JanusSubscriber.mids(of: reply.data["streams"]), offered: offered)
    } catch JanusError.plugin(code: Self.noSuchFeed, let reason) {
      await drop(attached)
      guard rooms[callId]?.participants[who]?.feed == feed else { return }
      // A publisher left (or its media went down) while the request was on its way.
      next = rooms[callId]?.participants[who]?.subscriber.refused(feed: JanusSubscriber.feed(inRefusal: reason))
    } catch {
      await drop(attached)
      guard rooms[callId]?.participants[who]?.feed == feed else { return }
      return fail(.join(callId: callId, participant: who), error)
    }
    if let next { send(next, for: who, in: callId) }
  }

  /// Detaches a subscriber handle that a request attached for nothing.
  private func drop(_ handle: UInt64?) async {
    guard let handle else { return }
    owners[handle] = nil
    await session?.detach(handle)
  }

  /// An offer Janus made for a single subscriber connection, with whose media each of its live
  /// sections carries. Whether there was one: the next request waits for the device's answer.
  private func forwardOffer(
    _ jsep: JSONValue?, summary: JSONValue?, restart: GroupRestart?, to who: Identity, in callId: CallID
  ) -> Bool {
    guard let room = rooms[callId], jsep?["type"]?.stringValue == "offer", let sdp = jsep?["sdp"]?.stringValue
    else { return false }
    let peers = Dictionary(
      room.participants.values.map { ($0.feed, $0.identity.peer) }, uniquingKeysWith: { a, _ in a })
    let sections =
      summary == nil
      ? room.participants[who]?.subscriberSections ?? []
      : JanusSubscriber.sections(of: summary, participants: peers)
    rooms[callId]?.participants[who]?.subscriberSections = sections
    log.debug("group call \(callId): subscriber offer to \(who.userId), \(sections.count) sections", callId: callId)
    emit(
      .send(
        .groupOffer(
          .init(callId: callId, stream: Self.subscriberStream, sdp: sdp, streams: sections, restart: restart)),
        callId: callId, to: who))
    return true
  }

  private func startSubscription(_ callId: CallID, _ subscriber: Identity, to publisher: Identity) {
    let pair = [subscriber, publisher]
    guard rooms[callId]?.participants[subscriber]?.subscriptions[publisher] == nil, subscribing.insert(pair).inserted
    else { return }
    let task = Task {
      do {
        try await self.subscribe(callId, subscriber, to: publisher)
      } catch JanusError.plugin(code: Self.noSuchFeed, _) {
        // The publisher left (or its media went down) while the subscription was being made.
        self.log.info(
          "group call \(callId): \(publisher.userId)'s feed went away before \(subscriber.userId) got it",
          callId: callId)
      } catch {
        self.fail(.join(callId: callId, participant: subscriber), error)
      }
      self.subscribing.remove(pair)
    }
    subscriptions[callId, default: []].append(task)
  }

  /// Offers `publisher`'s feed to `subscriber` on a subscriber handle of its own.
  private func subscribe(
    _ callId: CallID, _ subscriber: Identity, to publisher: Identity, restart: GroupRestart? = nil
  ) async throws {
    guard let room = rooms[callId], let feed = room.participants[publisher]?.feed,
      room.participants[subscriber]?.subscriptions[publisher] == nil, let session
    else { return }
    let handle = try await session.attach()
    let stream = "feed-\(feed)"
    owners[handle] = HandleOwner(callId: callId, participant: subscriber, stream: stream)
    let reply = try await session.message(
      handle,
      [
        "request": "join", "ptype": "subscriber", "room": .int(Int64(room.number)), "pin": .string(room.pin),
        "streams": [["feed": .int(Int64(feed))]],
      ])
    guard let sdp = reply.jsep?["sdp"]?.stringValue else {
      throw JanusError.protocolViolation("subscribe: no offer in \(reply.data.serializedString)")
    }
    // Either side may have left while Janus was answering.
    guard rooms[callId]?.participants[subscriber] != nil, rooms[callId]?.participants[publisher] != nil else {
      owners[handle] = nil
      await session.detach(handle)
      return
    }
    rooms[callId]?.participants[subscriber]?.subscriptions[publisher] = Subscription(handle: handle, stream: stream)
    emit(
      .send(
        .groupOffer(.init(callId: callId, stream: stream, sdp: sdp, from: publisher.peer, restart: restart)),
        callId: callId, to: subscriber))
  }

  private func handle(of participant: Participant, stream: String) -> UInt64? {
    if stream == Self.publisherStream { return participant.handle }
    if stream == Self.subscriberStream { return participant.subscriber.handle }
    return participant.subscriptions.values.first { $0.stream == stream }?.handle
  }

  private func refuse(_ callId: CallID, _ who: Identity, _ problem: String) {
    log.warning("group call \(callId): \(who.userId)/\(who.deviceId): \(problem)", callId: callId)
  }

  private func connectedSession() async throws -> JanusSession {
    if let session, await !session.isLost, manager != nil { return session }
    let fresh = JanusSession(
      baseURL: settings.url, apiSecret: settings.apiSecret, http: http, requestTimeout: settings.requestTimeout)
    try await fresh.open(
      onEvent: { [weak self] event in Task { await self?.janusEvent(event) } },
      onLost: { [weak self] reason in Task { await self?.sessionLost(fresh, reason) } })
    manager = try await fresh.attach()
    session = fresh
    return fresh
  }

  /// Janus died or restarted: every call on it has lost its media.
  private func sessionLost(_ lost: JanusSession, _ reason: String) {
    guard lost === session else { return }
    log.error("Janus session lost: \(reason)")
    session = nil
    manager = nil
    owners = [:]
    let failed = Array(rooms.keys)
    rooms = [:]
    for callId in failed { emit(.callFailed(callId: callId, reason: reason)) }
  }

  private func janusEvent(_ event: JanusSession.Event) {
    guard let handle = event.handle, let owner = owners[handle] else { return }
    switch event.message["janus"]?.stringValue {
    case "trickle":
      let candidate = event.message["candidate"]
      if candidate?["completed"]?.boolValue == true { return }
      guard let line = candidate?["candidate"]?.stringValue else { return }
      let ice = IceCandidate(
        candidate: line, sdpMid: candidate?["sdpMid"]?.stringValue,
        sdpMLineIndex: candidate?["sdpMLineIndex"]?.intValue)
      emit(
        .send(
          .groupCandidate(.init(callId: owner.callId, stream: owner.stream, candidate: ice)), callId: owner.callId,
          to: owner.participant))
    case "webrtcup":
      log.debug(
        "group call \(owner.callId): Janus: \(owner.participant.userId)'s \(owner.stream) is up", callId: owner.callId)
      guard owner.stream == Self.publisherStream else { return }
      enqueue(ChainKey(callId: owner.callId, participant: owner.participant, stream: Self.publisherStream)) {
        do {
          try await self.published(owner.callId, owner.participant)
        } catch {
          await self.fail(.join(callId: owner.callId, participant: owner.participant), error)
        }
      }
    case "hangup":
      endHangupWait(handle, hungUp: true)
      log.info(
        "group call \(owner.callId): Janus hung up \(owner.participant.userId)'s \(owner.stream) "
          + "(\(event.message["reason"]?.stringValue ?? "no reason"))")
    default:
      return
    }
  }

  /// Forgets a failed call's room (Janus destroys it with the session, or it is already gone).
  private func forget(_ callId: CallID) {
    guard let room = rooms.removeValue(forKey: callId) else { return }
    let handles = room.participants.values.flatMap(\.handles)
    for handle in handles { owners[handle] = nil }
    Task {
      for handle in handles { await self.session?.detach(handle) }
      await self.destroy(room, of: callId)
    }
  }

  /// Janus room and feed ids: random, below 2^52 so that they stay exact as JSON numbers.
  private static func randomID() -> UInt64 { UInt64.random(in: 1...(1 << 52)) }
}
