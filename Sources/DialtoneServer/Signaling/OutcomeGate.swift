import DialtoneCalls
import DialtoneMetrics
import DialtoneProtocol
import DialtoneSessions
import DialtoneStorage
import DialtoneSupport
import Foundation

/// What a handled request (or timer, or SFU event) produced: the reply, to whom, and the effects.
struct Output {
  var session: (any DeliverySession)?
  /// A request forwarded by another node: the reply goes back there instead. Out of line: it
  /// holds a whole client message, and outputs are mostly a local session's.
  var forwarded: ForwardedRequest? {
    get { storedForwarded?.value }
    set { storedForwarded = newValue.map(OutOfLine.init) }
  }
  private var storedForwarded: OutOfLine<ForwardedRequest>?
  var requestID: String?
  var reply: ServerMessage?
  /// The reply may wait briefly to share a write (`CallEffect` acks of candidates).
  var coalesced = false
  /// The reply is the ack to a relayed candidate: written without a seq, kept for no resume
  /// where the session can (`DeliverySession.answerRelayed`).
  var relayedAnswer = false
  var effects: [CallEffect]
  var wasHeld = false
  /// A relayed message's arrival: the relay latency is measured when its copy is written.
  var relayedFrom: ContinuousClock.Instant?

  init(
    session: (any DeliverySession)? = nil, forwarded: ForwardedRequest? = nil, requestID: String? = nil,
    reply: ServerMessage? = nil, coalesced: Bool = false, relayedAnswer: Bool = false, effects: [CallEffect],
    relayedFrom: ContinuousClock.Instant? = nil
  ) {
    self.relayedAnswer = relayedAnswer
    self.session = session
    storedForwarded = forwarded.map(OutOfLine.init)
    self.requestID = requestID
    self.reply = reply
    self.coalesced = coalesced
    self.effects = effects
    self.relayedFrom = relayedFrom
  }
}

/// Lets outcomes out once the journal has what they changed, in each call's order, and answers
/// whoever asked: a session here, or the node that forwarded the request. An acknowledged change
/// survives kill -9; a call's messages are never seen out of order.
///
/// It also remembers which requests have an answer on its way (held here, handled by another
/// node, or being stored), so that a retry meanwhile is not handled twice.
final class OutcomeGate {
  private let journal: CallJournal
  private let effects: EffectApplier
  private let placement: any CallPlacement
  private let metrics: ServerMetrics
  private var held = HeldOutcomes<Output>()
  /// Requests whose answer is coming, by session and request id.
  private var awaited: Set<AwaitedRequest> = []
  /// Requests other nodes forwarded, answered once however often they come.
  private var forwardedAnswers = ForwardedAnswers()
  private let registry: SessionRegistry

  init(
    journal: CallJournal, effects: EffectApplier, placement: any CallPlacement, registry: SessionRegistry,
    metrics: ServerMetrics
  ) {
    self.registry = registry
    self.journal = journal
    self.effects = effects
    self.placement = placement
    self.metrics = metrics
  }

  /// Sends the outcome's reply and applies its effects once its journal writes (and those of
  /// the call's outcomes before it) are on disk.
  func emit(_ output: Output, for callId: CallID?) {
    var changes: [LiveCallChange] = []
    for case .persist(let change) in output.effects { changes.append(change) }
    let ticket = changes.isEmpty ? nil : journal.submit(changes)
    guard let callId, let wait = ticket ?? (held.isEmpty ? nil : held.pendingTicket(of: callId)) else {
      return release(output)
    }
    var output = output
    output.wasHeld = true
    held.hold(output, for: callId, until: wait)
    if let session = output.session, let id = output.requestID { awaited.insert(Self.key(session.id, id)) }
  }

  /// The journal wrote everything up to `ticket`.
  func committed(upTo ticket: UInt64) {
    for output in held.release(upTo: ticket) { release(output) }
  }

  /// Whether a call has outcomes waiting for the journal (it cannot be handed over yet).
  func holds(_ callId: CallID) -> Bool { !held.isEmpty && held.pendingTicket(of: callId) != nil }

  private func release(_ output: Output) {
    if let session = output.session, let reply = output.reply, let id = output.requestID {
      if output.wasHeld { awaited.remove(Self.key(session.id, id)) }
      if output.relayedAnswer {
        session.answerRelayed(reply, to: id, coalesced: output.coalesced)
      } else {
        session.answer(reply, to: id, coalesced: output.coalesced)
      }
    } else if let request = output.forwarded, let reply = output.reply {
      // A relayed candidate's ack goes back unstored where the placement can, and is not
      // remembered: the request sent again is handled afresh.
      let unstored = output.relayedAnswer && placement.repliesUnstored
      let repeats =
        unstored ? forwardedAnswers.answeredUnremembered(request) : forwardedAnswers.answered(request, reply)
      answer(request, with: reply, unstored: unstored)
      for repeated in repeats { answer(repeated, with: reply, unstored: unstored) }
    }
    effects.apply(output.effects)
    for case .persist(let change) in output.effects {
      switch change {
      case .ended(let record, _, _): placement.finished(record.callId)
      case .groupEnded(let record, _): placement.finished(record.callId)
      default: break
      }
    }
    if let arrived = output.relayedFrom { observeRelayLatency(since: arrived) }
  }

  /// The relay's fast lane: a plain relayed message whose call has nothing held (`holds` is
  /// false) and nothing to journal goes out as `emit` would release its outcome (the sender's
  /// ack answered without a seq and remembered, then the copy delivered, then the relay latency
  /// observed), without an `Output` and its effects array built and walked for it.
  func relay(
    _ message: ServerMessage, to target: CallRouter.PlainTarget, ack: ServerMessage, session: any DeliverySession,
    requestID: String, coalesced: Bool, received: ContinuousClock.Instant
  ) {
    session.answerRelayed(ack, to: requestID, coalesced: coalesced)
    effects.deliver(message, toDevice: target.deviceId, of: target.userId)
    observeRelayLatency(since: received)
  }

  private func observeRelayLatency(since arrived: ContinuousClock.Instant) {
    // `seconds` reads the duration's components once (each read divides 128-bit numbers).
    metrics.relayLatency.observe((ContinuousClock.now - arrived).seconds)
  }

  // MARK: - Answers on their way

  func isAwaited(_ sessionID: String, _ requestID: String) -> Bool {
    !awaited.isEmpty && awaited.contains(Self.key(sessionID, requestID))
  }

  /// Whether any answer is on its way (nearly never, on one server): callers skip building
  /// `isAwaited`'s arguments when not.
  var awaitsAny: Bool { !awaited.isEmpty }

  func expect(_ sessionID: String, _ requestID: String) { awaited.insert(Self.key(sessionID, requestID)) }

  /// The awaited answer was stored in the session already (by the node that answered it): it is
  /// only remembered here, for a repeat of the request.
  func remembered(_ reply: ServerMessage, _ sessionID: String, _ requestID: String) {
    awaited.remove(Self.key(sessionID, requestID))
    registry.session(sessionID)?.remember(reply, for: requestID)
  }

  /// The awaited answer came: it goes to its session.
  func arrived(_ reply: ServerMessage, _ sessionID: String, _ requestID: String) {
    awaited.remove(Self.key(sessionID, requestID))
    registry.session(sessionID)?.answer(reply, to: requestID, coalesced: false)
  }

  // MARK: - Requests other nodes forwarded

  /// Whether a forwarded request is new (it is handled), a repeat of one being handled (it
  /// waits for that answer), or answered before (answered again, the same).
  func arrive(_ request: ForwardedRequest) -> ForwardedAnswers.Seen { forwardedAnswers.arrive(request) }

  /// The answer to a forwarded request was dropped before it was stored (`forwardedDropped`):
  /// the request forwarded again is handled afresh.
  func forgetForwarded(_ sessionID: String, _ requestID: String) {
    forwardedAnswers.forget(sessionID: sessionID, requestID: requestID)
  }

  /// A request of a session here that the placement found runs here is answered as any other
  /// (before its effects); another node's goes back there. `unstored`: the ack to a relayed
  /// candidate where the placement sends such acks without a seq (`CallPlacement.repliesUnstored`),
  /// written once the copies it caused are stored, by this node's store or by the requester's node.
  func answer(_ request: ForwardedRequest, with reply: ServerMessage, unstored: Bool = false) {
    let (sessionID, here) = (request.origin.sessionID, request.origin.node == placement.thisNode)
    switch (here, unstored) {
    case (true, false): arrived(reply, sessionID, request.id)
    case (true, true):
      awaited.remove(Self.key(sessionID, request.id))
      registry.session(sessionID)?.answerRelayed(reply, to: request.id, coalesced: false)
    case (false, false): placement.reply(reply, to: request)
    case (false, true): placement.replyUnstored(reply, to: request)
    }
  }

  /// An answer another node sent without a seq came (`ClusterLetter.unstoredReply`): the
  /// request is no longer awaited, and its answer is not remembered.
  func arrivedUnstored(_ sessionID: String, _ requestID: String) {
    awaited.remove(Self.key(sessionID, requestID))
  }

  private static func key(_ sessionID: String, _ requestID: String) -> AwaitedRequest {
    AwaitedRequest(sessionID: sessionID, requestID: requestID)
  }
}

/// A request by its session and id: a pair, not the two joined into a new string, so that
/// checking a request (every one a session sends while any answer is on its way) allocates nothing.
private struct AwaitedRequest: Hashable {
  let sessionID: String
  let requestID: String
}
