import DialtoneClient
import DialtoneGStreamer
import DialtoneJSON
import DialtoneProtocol
import Foundation

/// One softphone call, from dial (or the incoming invite) to its end: reports each milestone,
/// carries stdin lines over the data channel, hangs up after `duration`, and turns the way the
/// call ended into the process's exit status.
actor SoftphoneCall {
  enum Role {
    case caller(to: String)
    /// Answers 1:1 calls and group rings.
    case callee(auto: Bool)
    case group(GroupStart)

    var isGroup: Bool {
      if case .group = self { return true }
      return false
    }
  }

  /// How a group softphone enters its call (a video call with `--video`).
  enum GroupStart {
    case create(members: [String], title: String?)
    case join(CallID)
    case room(String)
  }

  /// Exit statuses (documented in `dialtone --help` and the README).
  enum Status: Int32 {
    case completed = 0
    case error = 1
    case declined = 3
    case busy = 4
    case missed = 5
    case failed = 6
    case cancelled = 7
    case answeredElsewhere = 8
    case removed = 9
  }

  private enum Input: Sendable {
    case client(CallClient.Event)
    case state(CallID, CallEngine.State)
    case milestone(GStreamerPeerConnection.Milestone, at: ContinuousClock.Instant?, GStreamerPeerConnection)
    case line(String)
    case data(Data)
    case durationElapsed
    case interrupt
    case group(GroupCall.Event)
    case heard(Peer, at: ContinuousClock.Instant)
    case connection(GStreamerPeerConnection)
    case remoteCamera(Bool)
    case remoteVideo(Bool)
    case remoteHold(Bool)
    case legConnected(String)
    case remoteCandidate(IceCandidate)
  }

  private let client: CallClient
  private let factory: GStreamerPeerConnectionFactory
  private let role: Role
  private let duration: Double
  private let report: MilestoneReport
  private let inputs: AsyncStream<Input>
  private let sink: AsyncStream<Input>.Continuation

  private var engine: CallEngine?
  private var wasConnected = false
  /// Remote audio or video was decoded at least once: a call that connected but never carried
  /// media ended as `failed`, not `completed`.
  private var mediaFlowed = false
  /// The other side held the call: no audio was to be expected from it meanwhile.
  private var heldByRemote = false
  private var answering = false
  private var awaitingSurvivor: CallID?
  private var ringingOffers: [CallID: CallEngine] = [:]

  private let participantAudio: ParticipantAudio?
  /// When the duration elapses or on ^C: end the group call for everyone (the creator).
  private let endForAll: Bool
  /// Dial video calls (`--video`).
  private let video: Bool
  /// The call's latest peer connections, newest last (a few: pre-connect legs, restarts).
  private var connections: [GStreamerPeerConnection] = []
  private var connectionsMade = 0
  /// Where the call's video arrives: the newest connection that decoded any (a leg that lost
  /// or a connection replaced before media decoded none), else the newest.
  private var videoConnection: GStreamerPeerConnection? {
    connections.last { $0.videoReceived().frames > 0 } ?? connections.last
  }
  private var group: GroupCall?
  private var groupJoined = false
  private var memberStates: [String: GroupMemberState] = [:]
  /// The group call is a video call (as the server says: a call joined by id may be one).
  private var groupVideo = false
  /// Every remote participant's stream of the group call, in the order they came (their video
  /// is reported when the call ends).
  private var remoteStreams: [(from: Peer, connection: GStreamerPeerConnection)] = []

  init(
    client: CallClient, factory: GStreamerPeerConnectionFactory, role: Role, duration: Double, report: MilestoneReport,
    participantAudio: ParticipantAudio? = nil, endForAll: Bool = false, video: Bool = false
  ) {
    self.video = video
    self.client = client
    self.factory = factory
    self.role = role
    self.duration = duration
    self.report = report
    self.participantAudio = participantAudio
    self.endForAll = endForAll
    (inputs, sink) = AsyncStream<Input>.makeStream(bufferingPolicy: .unbounded)
  }

  func interrupt() { sink.yield(.interrupt) }

  func run() async -> Int32 {
    forward(client.events) { .client($0) }
    forward(factory.created) { [sink] pc in
      Task { for await m in pc.milestones { sink.yield(.milestone(m, at: pc.reachedAt(m), pc)) } }
      Task { for await candidate in pc.remoteCandidates { sink.yield(.remoteCandidate(candidate)) } }
      return .connection(pc)
    }
    forward(StandardInputLines.stream()) { .line($0) }
    let sink = self.sink
    participantAudio?.onFirstAudio { sink.yield(.heard($0, at: $1)) }
    await client.start()

    for await input in inputs {
      if let status = await handle(input) {
        sink.finish()
        return status.rawValue
      }
    }
    return Status.error.rawValue
  }

  // MARK: Inputs

  private func handle(_ input: Input) async -> Status? {
    switch input {
    case .client(let event):
      return await clientEvent(event)
    case .state(let callId, let state):
      guard callId == engine?.callId else { return nil }
      return await stateChanged(state)
    case .milestone(let m, let instant, let pc):
      report.mark(m.rawValue, at: instant)
      await markQuality(m, at: instant, on: pc)
      if m == .firstAudio || m == .firstVideoFrame { mediaFlowed = true }
      // A group call's stream: whose video it is (not told on a subscriber connection, which
      // carries several participants).
      if m == .firstVideoFrame, pc.videoByParticipant().isEmpty,
        let from = remoteStreams.first(where: { $0.connection === pc })?.from
      {
        report.mark("first-video-frame \(from.userId)", at: instant)
      }
    case .line(let line):
      await typed(line)
    case .data(let data):
      report.received(String(decoding: data, as: UTF8.self))
    case .durationElapsed:
      report.note("duration reached: hanging up")
      if group != nil { return await endGroup() }
      await hangUp()
    case .interrupt:
      report.note("interrupted: hanging up")
      if group != nil { return await endGroup() }
      guard engine != nil else { return .error }
      await hangUp()
    case .group(let event):
      return await groupEvent(event)
    case .connection(let pc):
      connectionsMade += 1
      connections = Array((connections + [pc]).suffix(8))
    case .legConnected(let device):
      // Pre-connect: this leg is ready, and Answer will only switch media on.
      report.event(
        "preconnected", ["device": .string(device)],
        text: device.isEmpty ? "connected while ringing" : "connected to \(device) while ringing")
    case .remoteCamera(let on):
      report.event("remote-camera", ["on": .bool(on)], text: "the other side's camera is \(on ? "on" : "off")")
    case .remoteVideo(let on):
      report.event(
        "remote-video", ["on": .bool(on)], text: on ? "the other side sends video" : "the other side stopped its video")
    case .remoteHold(let held):
      if held { heldByRemote = true }
      report.event(
        "remote-hold", ["onHold": .bool(held)],
        text: held ? "the other side put the call on hold" : "the other side took the call off hold")
    case .heard(let peer, let instant):
      report.mark("first-audio \(peer.userId)", at: instant)
    case .remoteCandidate(let candidate):
      // What the other side revealed of its addresses (a private pre-connect leg: its relay's).
      let (type, address, port) = Self.describe(candidate)
      report.event(
        "remote-candidate",
        [
          "type": .string(type), "address": .string(address), "port": .string(port),
          "candidate": .string(candidate.candidate),
        ],
        text: "remote candidate: \(type) \(address):\(port)")
    }
    return nil
  }

  /// A candidate line's type, address and port (`candidate:F 1 UDP P ADDRESS PORT typ TYPE …`);
  /// "?" for what it lacks.
  static func describe(_ candidate: IceCandidate) -> (type: String, address: String, port: String) {
    let fields = candidate.candidate.split(separator: " ").map(String.init)
    let type = fields.firstIndex(of: "typ").flatMap { $0 + 1 < fields.count ? fields[$0 + 1] : nil } ?? "?"
    return (type, fields.count > 4 ? fields[4] : "?", fields.count > 5 ? fields[5] : "?")
  }

  /// The media layer's milestones, more precise than the engine's, for the call's quality
  /// report (1:1 calls only: a group call's streams are not a `CallEngine`'s).
  private func markQuality(
    _ m: GStreamerPeerConnection.Milestone, at instant: ContinuousClock.Instant?, on pc: GStreamerPeerConnection
  ) async {
    guard let engine, group == nil, !remoteStreams.contains(where: { $0.connection === pc }) else { return }
    let milestone: CallQualityRecorder.Milestone
    switch m {
    case .iceConnected: milestone = .iceConnected
    case .dtlsConnected: milestone = .dtlsConnected
    case .firstAudio: milestone = .firstAudio
    case .firstVideoFrame: milestone = .firstVideo
    case .dataChannelOpen: return
    }
    let ago = instant.map { ContinuousClock.now - $0 } ?? .zero
    let seconds = Double(ago.components.seconds) + Double(ago.components.attoseconds) / 1e18
    await engine.markMilestone(milestone, at: Date().addingTimeInterval(-max(0, seconds)))
  }

  private func clientEvent(_ event: CallClient.Event) async -> Status? {
    switch event {
    case .connected(let welcome):
      report.note("signed in as \(welcome.userId)/\(welcome.deviceId)")
      if welcome.resumed {
        report.note("session resumed")
      } else if welcome.resync {
        report.note("new session: resync")
      }
      if case .caller(let to) = role, engine == nil {
        report.start("dialing \(to)\(video ? " (video)" : "")")
        follow(await client.dial(to, video: video))
      } else if case .callee = role, engine == nil, group == nil {
        report.note("waiting for a call")
      } else if case .group(let start) = role, group == nil {
        return await startGroup(start)
      }
    case .disconnected:
      report.note("signaling disconnected; reconnecting")
    case .stopped(let reason):
      report.note("signaling stopped: \(reason)")
      return wasConnected ? .completed : .error
    case .incoming(let incoming):
      if case .caller = role {
        // Glare: the survivor is answered by CallClient; follow it once the glare is known.
        ringingOffers[incoming.callId] = incoming
        if awaitingSurvivor == incoming.callId { adoptSurvivor(incoming) }
      } else if engine == nil {
        let from = await incoming.remotePeer.map { "\($0.name.map { "\($0) " } ?? "")(\($0.userId)/\($0.deviceId))" }
        report.start("incoming call from \(from ?? "unknown")")
        follow(incoming)
        if case .callee(auto: true) = role {
          await answer()
        } else {
          report.note("press Enter to answer, or type d and Enter to decline")
        }
      }
    case .glare(let replaced, let survivor):
      report.note("glare: call \(replaced) replaced by \(survivor)")
      if let incoming = ringingOffers[survivor] { adoptSurvivor(incoming) } else { awaitingSurvivor = survivor }
    case .resolved, .groupResolved:
      break
    case .groupIncoming(let incoming):
      guard case .callee(let auto) = role, engine == nil, group == nil else {
        await incoming.decline()  // busy with another call: this device refuses the ring
        return nil
      }
      let invite: ServerMessage.GroupInvite? = {
        if case .invited(let invite) = incoming.entry { return invite }
        return nil
      }()
      let from = invite.map { "\($0.from.name ?? $0.from.userId) (\($0.memberCount) members)" } ?? "unknown"
      report.start("group call from \(from)\(invite?.title.map { ": \($0)" } ?? "")")
      followGroup(incoming)
      if auto {
        report.mark("answering")
        await incoming.join()
      } else {
        report.note("press Enter to join, or type d and Enter to decline")
      }
    }
    return nil
  }

  // MARK: Group calls

  private func startGroup(_ start: GroupStart) async -> Status? {
    switch start {
    case .create(let members, let title):
      report.start("group call to \(members.joined(separator: ", "))")
      followGroup(await client.createGroup(members: members, video: video, title: title))
    case .join(let callId):
      report.start("joining group call \(callId)")
      followGroup(await client.joinGroup(callId, video: video))
    case .room(let name):
      report.start("joining room \(name)")
      do {
        followGroup(try await client.joinRoom(name, video: video))
      } catch {
        report.note("room-join refused: \(error)")
        report.finish(reason: "error: \(error)", status: Status.error.rawValue)
        return .error
      }
    }
    return nil
  }

  private func followGroup(_ group: GroupCall) {
    self.group = group
    forward(group.events) { .group($0) }
  }

  private func groupEvent(_ event: GroupCall.Event) async -> Status? {
    switch event {
    case .state(let state):
      switch state {
      case .ringing: break
      case .joining: report.mark("joining")
      case .joined:
        report.mark("joined")
        if let callId = group?.callId { report.note("group call \(callId)") }
        if !groupJoined, duration > 0 {
          let sink = self.sink
          let seconds = duration
          Task {
            try? await Task.sleep(for: .seconds(seconds))
            sink.yield(.durationElapsed)
          }
        }
        groupJoined = true
      case .ended(let reason):
        return finishGroup(reason)
      }
    case .participants(let state):
      groupVideo = state.video
      for member in state.members where memberStates[member.userId] != member.state {
        memberStates[member.userId] = member.state
        report.participant(member.userId, member.state.rawValue)
      }
    case .remoteStreamAdded(_, let from, let connection):
      report.participant(from.userId, "stream")
      // (A participant who comes back on the single subscriber connection is already listed.)
      if let pc = connection as? GStreamerPeerConnection,
        !remoteStreams.contains(where: { $0.from == from && $0.connection === pc })
      {
        remoteStreams.append((from, pc))
        // Its first frame may have been decoded before this event was handled.
        if pc.videoByParticipant().isEmpty, let at = pc.reachedAt(.firstVideoFrame) {
          report.mark("first-video-frame \(from.userId)", at: at)
        }
      }
    case .remoteStreamState(_, let from, let state):
      if state == .connected { report.mark("connected \(from.userId)") }
    case .remoteStreamRemoved(_, let from):
      participantAudio?.streamEnded(from.userId)
      report.participant(from.userId, "stream-ended")
    case .publisherState(let state):
      if state == .connected { report.mark("publishing") }
    case .liveKit(let url, _):
      report.note("the call's media is on LiveKit at \(url): this softphone has no LiveKit engine")
    case .error(let message):
      report.note("group call: \(message)")
    }
    return nil
  }

  /// What each remote participant's streams decoded so far.
  private var receivedVideo: [(userId: String, video: GStreamerPeerConnection.ReceivedVideo)] {
    ParticipantVideo.byParticipant(
      remoteStreams.flatMap { stream in
        // The single subscriber connection carries several participants: each one's own.
        let sections = stream.connection.videoByParticipant()
        guard !sections.isEmpty else { return [(stream.from, stream.connection.videoReceived())] }
        return sections.filter { $0.from == stream.from }
      })
  }

  /// The duration elapsed or ^C: leave (or, with --end-for-all, end for everyone).
  private func endGroup() async -> Status? {
    guard let group else { return .error }
    if endForAll, groupJoined { await group.endForAll() } else { await group.leave() }
    return nil
  }

  private func finishGroup(_ reason: GroupEndReason?) -> Status {
    let status: Status
    switch reason {
    case nil: status = groupJoined ? .completed : .declined
    case .ended, .completed: status = groupJoined ? .completed : .cancelled
    case .cancelled: status = .cancelled
    case .missed, .unanswered: status = .missed
    case .declinedElsewhere: status = .declined
    case .joinedElsewhere: status = .answeredElsewhere
    case .mediaFailed, .connectionLost, .serverRestart: status = .failed
    case .removed: status = .removed
    }
    if let group, group.video || groupVideo || video {
      for (userId, received) in receivedVideo { report.participantVideo(userId, received) }
    }
    report.finish(reason: reason?.rawValue ?? "local", status: status.rawValue)
    return status
  }

  private func stateChanged(_ state: CallEngine.State) async -> Status? {
    switch state {
    case .idle, .calling, .incoming:
      break
    case .ringing:
      report.mark("ringing")
    case .connecting:
      report.mark("accepted")
    case .connected:
      // Back from `reconnecting` (the path came back, or an ICE restart on a fresh connection).
      report.mark(wasConnected ? "reconnected" : "connected")
      if !wasConnected, duration > 0 {
        let sink = self.sink
        let seconds = duration
        Task {
          try? await Task.sleep(for: .seconds(seconds))
          sink.yield(.durationElapsed)
        }
      }
      wasConnected = true
    case .reconnecting(let attempt):
      report.mark(attempt == 0 ? "ice-disconnected" : "ice-restart-\(attempt)")
    case .ended(let ending):
      if case .glare = ending { return nil }  // the survivor carries on
      return await finish(ending)
    }
    return nil
  }

  /// What follows `verb` in a typed command (`invite bob,carol`), nil for another command.
  private static func argument(of verb: String, in line: String) -> String? {
    let words = line.trimmingCharacters(in: .whitespaces)
    guard words.lowercased().hasPrefix(verb + " ") else { return nil }
    let rest = words.dropFirst(verb.count).trimmingCharacters(in: .whitespaces)
    return rest.isEmpty ? nil : rest
  }

  private func typed(_ line: String) async {
    if let group {
      let command = line.trimmingCharacters(in: .whitespaces).lowercased()
      if await group.state == .ringing {
        if command.hasPrefix("d") { await group.decline() } else { await group.join() }
      } else if let members = Self.argument(of: "invite", in: line) {
        await group.invite(members.split { $0 == "," || $0 == " " }.map(String.init))
      } else if let userId = Self.argument(of: "remove", in: line) {
        await group.remove(userId)
      } else if command == "mute" || command == "unmute" {
        await group.setMuted(command == "mute")
        report.note(command == "mute" ? "muted" : "unmuted")
      } else if command == "audio count" {
        let received = participantAudio?.received ?? [:]
        report.event(
          "audio-count",
          [
            "participants": .object(received.mapValues { JSONValue.int(Int64($0)) }),
            // Every peer connection this softphone made (a group call: publisher and receivers).
            "connections": .int(Int64(connectionsMade)),
          ],
          text: "audio bytes received: "
            + received.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
      } else if command == "video count" {
        let received = receivedVideo
        let total = received.reduce(0) { $0 + $1.video.frames }
        report.event(
          "video-count",
          [
            "frames": .int(Int64(total)),
            "participants": .object(
              Dictionary(
                received.map { ($0.userId, JSONValue.int(Int64($0.video.frames))) },
                uniquingKeysWith: { first, _ in first })),
          ],
          text: "\(total) video frames received: "
            + received.map { "\($0.userId) \($0.video.frames)" }.joined(separator: ", "))
      }
      return
    }
    guard let engine else { return }
    // Commands rather than chat: the camera, video on and off (renegotiated), and a count of
    // the frames received so far.
    switch line.trimmingCharacters(in: .whitespaces).lowercased() {
    case "video on", "video off":
      let on = line.lowercased().hasSuffix("on")
      await engine.setSendsVideo(on)
      report.note(on ? "video on: renegotiating" : "video off: renegotiating")
      return
    case "hold", "unhold":
      let held = line.trimmingCharacters(in: .whitespaces).lowercased() == "hold"
      await engine.setOnHold(held)
      report.note(held ? "on hold" : "off hold")
      return
    case "camera off", "camera on":
      let on = line.lowercased().hasSuffix("on")
      await engine.setVideoEnabled(on)
      report.note(on ? "camera on" : "camera off")
      return
    case "video count":
      let connection = videoConnection
      let received = connection?.videoReceived() ?? .init()
      let rgb: [JSONValue] = [.int(Int64(received.red)), .int(Int64(received.green)), .int(Int64(received.blue))]
      let codec = connection?.videoCodec?.rawValue
      report.event(
        "video-count",
        [
          "frames": .int(Int64(received.frames)), "rgb": .array(rgb), "codec": codec.map(JSONValue.string) ?? .null,
          "fps": .double(received.framesPerSecond),
        ],
        text: "\(received.frames) video frames received\(codec.map { " (\($0))" } ?? "")")
      return
    default:
      break
    }
    if case .callee = role, !answering {
      if line.trimmingCharacters(in: .whitespaces).lowercased().hasPrefix("d") {
        await engine.hangup()
      } else {
        await answer()
      }
      return
    }
    do {
      try await engine.sendData(Data(line.utf8))
    } catch {
      report.note("not sent (\(error))")
    }
  }

  // MARK: Call control

  private func follow(_ engine: CallEngine) {
    self.engine = engine
    let callId = engine.callId
    forward(engine.states) { .state(callId, $0) }
    forward(engine.dataMessages) { .data($0) }
    forward(engine.remoteCamera) { .remoteCamera($0) }
    forward(engine.remoteVideo) { .remoteVideo($0) }
    forward(engine.remoteHold) { .remoteHold($0) }
    forward(engine.legsConnected) { .legConnected($0) }
  }

  private func adoptSurvivor(_ incoming: CallEngine) {
    awaitingSurvivor = nil
    ringingOffers.removeAll()
    answering = true
    follow(incoming)
  }

  private func answer() async {
    guard let engine, !answering else { return }
    answering = true
    report.mark("answering")
    await client.answer(engine.callId)
  }

  private func hangUp() async {
    guard let engine else { return }
    await engine.hangup()
    await engine.drainSignaling()
  }

  /// The connection's last figures and the call's quality estimate, whoever ended the call
  /// (the engine read them as the call ended, before closing the connection).
  private func reportFinalQuality(_ engine: CallEngine) async {
    await engine.settle()
    if let stats = await engine.finalStats { report.stats(stats) }
    if let quality = await engine.finalQualityReport, quality.mos != nil { report.quality(quality) }
  }

  private func finish(_ ending: CallEngine.Ending) async -> Status {
    if let engine { await reportFinalQuality(engine) }
    let status: Status
    let reason: String
    switch ending {
    case .local where wasConnected && !mediaFlowed && !heldByRemote:
      status = .failed
      reason = "no media"
    case .local:
      // Ended here before connecting: a caller cancelled, a callee declined.
      if wasConnected {
        status = .completed
      } else if case .callee = role {
        status = .declined
      } else {
        status = .cancelled
      }
      reason = "local"
    case .remote(let why):
      reason = why.rawValue
      switch why {
      case .hangup: status = wasConnected && (mediaFlowed || heldByRemote) ? .completed : .failed
      case .declined, .declinedElsewhere: status = .declined
      case .busy: status = .busy
      case .missed: status = .missed
      case .cancelled: status = .cancelled
      case .answeredElsewhere: status = .answeredElsewhere
      case .failed, .connectionLost, .glare: status = .failed
      }
    case .iceFailed:
      status = .failed
      reason = "ice-failed"
    case .glare:
      status = .failed
      reason = "glare"
    case .error(let message):
      status = .error
      reason = "error: \(message)"
    }
    if let received = videoConnection?.videoReceived(), received.frames > 0 {
      report.video(
        frames: received.frames, width: received.width, height: received.height,
        rgb: (received.red, received.green, received.blue))
    }
    report.finish(reason: reason, status: status.rawValue)
    return status
  }

  // MARK: Plumbing

  private nonisolated func forward<S: AsyncSequence & Sendable>(
    _ sequence: S, _ transform: @escaping @Sendable (S.Element) -> Input?
  ) where S.Element: Sendable {
    let sink = self.sink
    Task {
      do {
        for try await element in sequence {
          if let input = transform(element) { sink.yield(input) }
        }
      } catch {}
    }
  }
}
