import DialtoneCalls
import DialtoneMetrics
import DialtoneProtocol
import DialtoneSessions
import DialtoneStorage
import DialtoneSupport
import Foundation

/// A request's way from its session (or from another node) to the call desk and back: decoded,
/// acknowledged messages taken off, repeats answered from memory, limits applied, requests about
/// calls of other nodes forwarded there, and the rest decided by the desk, whose outcome goes
/// out through the `OutcomeGate`.
///
/// A decision that needs the database (a call id never seen in memory) parks the request while
/// the store is asked off the network thread; the session's later requests wait behind it, so
/// they are still handled in the order they came, and every other socket goes on meanwhile.
final class RequestPipeline {
  /// A request that waits for the store's answer about a call id.
  private struct Parked {
    let message: ClientMessage
    let id: String
    let from: Identity
    let session: (any DeliverySession)?
    let forwarded: ForwardedRequest?
    let received: ContinuousClock.Instant
  }

  private let desk: CallDesk
  private let outcomes: OutcomeGate
  private let quality: QualityIntake
  private let placement: any CallPlacement
  private let liveCalls: any LiveCallStore
  private let observations: Observations
  private let clock: any DialtoneClock
  private let mailbox: HubMailbox
  private let log: Log
  private let inviteLimit: Double
  /// The cluster's session store, asked to admit each request before it is handled.
  private let store: (any SessionStore)?
  /// Whether plain relayed candidates take the fast lane (`handle`); everything else, and every
  /// candidate that is not plain, takes the general path. Also on a cluster node, for a call
  /// that runs here (one that does not is forwarded first): the lane makes the same calls to
  /// the session and the store as `emit` would (the ack through `answerRelayed`, the copy
  /// through `EffectApplier.deliver`), so what is numbered, stored and written is the same.
  let fastLane: Bool
  /// Calls started, by user (`ServerLimits.invitesPerMinute`).
  private var invites: RateLimiter<String>
  /// Requests waiting, by who sent them (a session here, or another node's), in order; the
  /// first of each waits for the store's answer about its call id.
  private var parked: [String: [Parked]] = [:]
  /// `parked` for a look-up, read out of the property first; changes go through `changeParked`
  /// (see `SocketGate.table`: the per-message look-up was a runtime exclusivity check).
  private var parkedNow: [String: [Parked]] { parked }
  /// The senders waiting on each call id the store is being asked about.
  private var asking: [CallID: [String]] = [:]
  /// Requests one sender may have waiting behind a call-id check.
  static let maxParked = 256
  /// Requests about calls this node is taking over, until they run here (a few per call).
  private var awaitingTakeOver: [CallID: [ForwardedRequest]] = [:]
  static let maxAwaitingTakeOver = 64
  /// What decoding a frame reads and writes, one stored property: each access to one of this
  /// class's stored properties is a runtime exclusivity check, one per property touched.
  private struct Intake {
    /// The last frame's decoding room (its tape), reused by the next frame: one allocation fewer
    /// per message. Frames are decoded one at a time, on the hub's thread.
    var decoding = MessageCodec.DecodingScratch()
    /// `dialtone_messages_received_total`'s series by message type (at its `ordinal`), found once
    /// each: counting a message then builds no label array, takes no lock of the family's and
    /// hashes nothing (a table keyed by the `String`-backed type hashed its name every time).
    var counters = [Counter?](repeating: nil, count: ClientMessageType.caseCount)

    /// Decodes a frame and counts it as received by its type (`series` makes a type's counter
    /// the first time).
    mutating func take(_ bytes: [UInt8], series: (ClientMessageType) -> Counter) throws(ProtocolError)
      -> ClientEnvelope
    {
      let frame = try MessageCodec.decodeClientMessage(bytes, scratch: &decoding)
      let type = frame.message.type
      if let counter = counters[type.ordinal] {
        counter.increment()
      } else {
        let counter = series(type)
        counters[type.ordinal] = counter
        counter.increment()
      }
      return frame
    }
  }
  private var intake = Intake()

  init(
    desk: CallDesk, outcomes: OutcomeGate, quality: QualityIntake, placement: any CallPlacement,
    liveCalls: any LiveCallStore,
    observations: Observations, clock: any DialtoneClock, mailbox: HubMailbox, limits: ServerLimits, log: Log,
    store: (any SessionStore)? = nil, fastLane: Bool
  ) {
    self.store = store
    self.fastLane = fastLane
    self.desk = desk
    self.outcomes = outcomes
    self.quality = quality
    self.placement = placement
    self.liveCalls = liveCalls
    self.observations = observations
    self.clock = clock
    self.mailbox = mailbox
    self.log = log
    inviteLimit = limits.invitesPerMinute
    invites = RateLimiter(limits.inviteRate)
  }

  // MARK: - A session's messages

  func handle(_ bytes: [UInt8], isText: Bool, session: any DeliverySession) {
    guard isText else {
      session.deliver(.error(.init(code: .badRequest, message: "binary frames are not part of the protocol")))
      return
    }
    let received = ContinuousClock.now
    let frame: ClientEnvelope
    do {
      frame = try intake.take(bytes) { [observations] in observations.metrics.messagesReceived.labels($0.rawValue) }
    } catch {
      observations.metrics.messagesReceived.labels("invalid").increment()
      observations.metrics.messagesRefused.labels(error.code.rawValue).increment()
      session.deliver(error.serverMessage)
      return
    }
    let message = frame.message
    if case .ack(let ack) = message { return session.acknowledge(upTo: ack.seq) }
    guard let requestID = frame.id else { return }
    // The session's id is read (a witness call and a retain) only when some answer is awaited.
    if outcomes.awaitsAny, outcomes.isAwaited(session.id, requestID) { return }
    let rules = message.type.rules
    // A candidate's repeat is handled afresh where its answer is not remembered (one server, and
    // a write-behind cluster's unstored ack): no look-up. A store-first cluster numbers, stores
    // and remembers it like any answer, and a resumed session's memory answers its repeat.
    if !(rules.repeatHandledAfresh && store == nil), session.answerAgain(requestID) { return }
    if rules.startsACall, let wait = invites.take(session.identity.userId, now: clock.now) {
      // Not remembered: the same id sent again later is handled afresh.
      return session.deliver(
        .error(
          .init(
            replyTo: requestID, code: .rateLimited, message: "more than \(Int(inviteLimit)) calls started per minute",
            callId: message.callId, retryAfterMs: wait.milliseconds)))
    }
    if !placement.placesEveryCallHere, let callId = message.callId, !desk.runs(callId) {
      let location = placement.location(of: callId)
      if location != .here {
        // Answered by the owner through `.replyArrived`; a retry meanwhile waits for that answer.
        outcomes.expect(session.id, requestID)
        placement.forward(message, id: requestID, from: session.identity, session: session.id, to: location.node)
        return
      }
    }
    let waiting = parkedNow
    let senderParked = !waiting.isEmpty && waiting[session.id] != nil
    if fastLane, !senderParked, case .candidate(let m) = message, m.toDevice == nil,
      !outcomes.holds(m.callId),
      // Read once: the session's identity is three strings, each retained again by every read.
      case let sender = session.identity,
      let target = desk.plainCandidateTarget(m.callId, from: sender, now: clock.now)
    {
      // The relay's fast lane, for the message most of a call's traffic is: a candidate of a
      // connected call that the router only relays (no state changed, nothing journaled, nothing
      // held before it). Exactly what `decide` and `OutcomeGate.emit` give it, the same bytes
      // to both sockets, without the general outcome's values built, copied and walked.
      return outcomes.relay(
        .candidate(.init(callId: m.callId, from: sender.peer, candidate: m.candidate)), to: target,
        ack: .ack(.init(replyTo: requestID, callId: m.callId)), session: session, requestID: requestID,
        coalesced: rules.ackMayWait, received: received)
    }
    // A relayed candidate is not admitted: it moves no call's state, so the store may refuse it
    // after it is handled (`WriteBehindHolder.submit`), and it is most of a call's messages
    // (a room kept and let go for each would cost every relayed message a look-up).
    if let store, !rules.mayBeRefusedOnceHandled, !store.admit(requestID, of: session.id, bytes: bytes.count) {
      // Refused before it is handled: nothing changed, nothing stored or remembered (protocol.md §15).
      observations.metrics.messagesRefused.labels(ErrorCode.rateLimited.rawValue).increment()
      return session.sendUnsequenced(
        .error(
          .init(
            replyTo: requestID, code: .rateLimited, message: "too much is waiting for the cluster's store",
            callId: message.callId, retryAfterMs: SessionHost.storeBacklogWait)))
    }
    let request = Parked(
      message: message, id: requestID, from: session.identity, session: session, forwarded: nil, received: received)
    if senderParked { return park(request, sender: session.id) }
    decide(request, sender: session.id, history: .notAsked)
  }

  // MARK: - Requests from other nodes

  /// A request another node forwarded: handled like one of this node's devices', except that the
  /// answer, once the journal has it, goes back to the node it came from.
  func handle(_ request: ForwardedRequest) {
    if let callId = request.message.callId, !desk.runs(callId), placement.isBeingTakenOver(callId) {
      // The lease is won, the journal being read: the request is handled once the call runs here.
      guard awaitingTakeOver[callId, default: []].count < Self.maxAwaitingTakeOver else {
        return outcomes.answer(
          request,
          with: .error(
            .init(
              replyTo: request.id, code: .internal, message: "the call is being taken over; try again", callId: callId))
        )
      }
      if awaitingTakeOver[callId] == nil {
        // Should the take-over never report back (Redis failed in the middle), the requests go
        // on after a while all the same, and get whatever answer this node has.
        _ = mailbox.post(.takeOverWaited(callId), after: TakeOver.wait, on: clock)
      }
      awaitingTakeOver[callId, default: []].append(request)
      return
    }
    if case .quality(let report) = request.message {
      // Stored off the thread and answered from there: never in the forwarded answers' memory.
      let call = desk.callState(report.callId, visibleTo: request.from)
      return quality.take(report, id: request.id, from: request.from, call: call, answer: .forwarded(request))
    }
    switch outcomes.arrive(request) {
    case .new: break
    case .inFlight: return
    case .answered(let reply): return outcomes.answer(request, with: reply)
    }
    let sender = Self.sender(of: request)
    let parkedRequest = Parked(
      message: request.message, id: request.id, from: request.from, session: nil, forwarded: request,
      received: ContinuousClock.now)
    if parkedNow[sender] != nil { return park(parkedRequest, sender: sender) }
    decide(parkedRequest, sender: sender, history: .notAsked)
  }

  /// The calls are taken over (or the wait for them is over): the requests about them go on.
  func takenOver(_ callIds: some Sequence<CallID>) {
    for callId in callIds {
      for waiting in awaitingTakeOver.removeValue(forKey: callId) ?? [] { handle(waiting) }
    }
  }

  private static func sender(of request: ForwardedRequest) -> String {
    request.origin.node + "\u{0}" + request.origin.sessionID
  }

  // MARK: - Deciding

  private func decide(_ request: Parked, sender: String, history: CallDesk.History) {
    let message = request.message
    if case .quality(let report) = message, let session = request.session {
      let call = desk.callState(report.callId, visibleTo: request.from)
      return quality.take(report, id: request.id, from: request.from, call: call, answer: .session(session.id))
    }
    let outcome: CallRouter.Outcome
    switch message {
    case .hello:
      outcome = .init(
        reply: .error(.init(replyTo: request.id, code: .invalidState, message: "this socket already has a session")))
    case .ping:
      outcome = .init(reply: .ack(.init(replyTo: request.id)))
    default:
      switch desk.handle(message, id: request.id, from: request.from, now: clock.now, history: history) {
      case .needsHistory(let callId):
        park(request, sender: sender, first: true)
        return ask(callId, for: sender)
      case .outcome(let decided, let note):
        outcome = decided
        switch note {
        case .running(let callId, let users): placement.running(callId, users: users)
        case .answered(let callId): placement.answered(callId)
        case nil: break
        }
      }
    }
    observe(message, outcome.reply, from: request.from)
    let rules = message.type.rules
    let relayed = rules.relayed && outcome.reply.isAck
    outcomes.emit(
      Output(
        session: request.session, forwarded: request.forwarded, requestID: request.id, reply: outcome.reply,
        coalesced: rules.ackMayWait && outcome.reply.isAck && request.forwarded == nil,
        // Only a candidate's: it moves no call's state, so its ack goes without a seq, kept for
        // no resume and not remembered (`DeliverySession.answerRelayed`: a repeat is handled
        // afresh; in a write-behind cluster unstored, its copies' once-keys keeping a repeat
        // from storing them twice). Also when another node forwarded it: that node writes the
        // ack without a seq where its placement can (`OutcomeGate.answer(_:with:unstored:)`).
        relayedAnswer: rules.mayBeRefusedOnceHandled && outcome.reply.isAck,
        effects: outcome.effects,
        relayedFrom: relayed && request.forwarded == nil ? request.received : nil),
      for: message.callId)
  }

  // MARK: - Waiting for the store

  private func park(_ request: Parked, sender: String, first: Bool = false) {
    var queue = parkedNow[sender] ?? []
    guard first || queue.count < Self.maxParked else {
      let refusal = ServerMessage.error(
        .init(
          replyTo: request.id, code: .rateLimited, message: "too many requests while a call id is being checked",
          callId: request.message.callId, retryAfterMs: 1000))
      if let forwarded = request.forwarded { return outcomes.answer(forwarded, with: refusal) }
      request.session?.deliver(refusal)
      return
    }
    if first { queue.insert(request, at: 0) } else { queue.append(request) }
    changeParked { $0[sender] = queue }
  }

  /// Changes `parked` on the map moved out of the property and back (see `parkedNow`).
  @discardableResult
  private func changeParked<Result>(_ change: (inout [String: [Parked]]) -> Result) -> Result {
    var map: [String: [Parked]] = [:]
    swap(&map, &parked)
    defer { swap(&map, &parked) }
    return change(&map)
  }

  /// Asks the store whether any call ever had the id, off the hub's thread (`.callIdChecked`).
  private func ask(_ callId: CallID, for sender: String) {
    let first = asking[callId] == nil
    asking[callId, default: []].append(sender)
    guard first else { return }
    let liveCalls = liveCalls
    let mailbox = mailbox
    let log = log
    liveCalls.isCallIdUsed(callId) { result in
      let history: CallDesk.History
      switch result {
      case .success(let used):
        history = .checked(callId, used: used)
      case .failure(let error):
        log.error("cannot look call id \(callId) up: \(error)", callId: callId)
        history = .unavailable(callId)
      }
      mailbox.post(.callIdChecked(callId, history))
    }
  }

  /// The store answered about `callId`: each sender waiting on it goes on with its requests, in
  /// order, until one waits again.
  func checked(_ callId: CallID, _ history: CallDesk.History) {
    for sender in asking.removeValue(forKey: callId) ?? [] {
      guard var queue = changeParked({ $0.removeValue(forKey: sender) }), !queue.isEmpty else { continue }
      let first = queue.removeFirst()
      decide(first, sender: sender, history: history)
      while !queue.isEmpty, parkedNow[sender] == nil {
        decide(queue.removeFirst(), sender: sender, history: .notAsked)
      }
      if !queue.isEmpty { changeParked { $0[sender, default: []] += queue } }
    }
  }

  // MARK: - Metrics

  /// The metrics of a handled message: refusals by code, and how fast a callee device rang.
  private func observe(_ message: ClientMessage, _ reply: ServerMessage, from who: Identity) {
    guard reply.isAck else {
      if case .error(let error) = reply { observations.metrics.messagesRefused.labels(error.code.rawValue).increment() }
      return
    }
    if case .ringing(let m) = message, let call = desk.callState(m.callId, visibleTo: who) {
      observations.calleeRang(after: Double(clock.now.millisecondsSince1970 - call.createdAt) / 1000)
    }
  }
}

extension ServerMessage {
  fileprivate var isAck: Bool {
    if case .ack = self { return true }
    return false
  }
}
