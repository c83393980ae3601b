import DialtoneProtocol
import Foundation

/// The call desk: every request about a call comes here, whatever the socket or node it came
/// from. It holds both routers and the block table and keeps the rules that span them: a call id
/// names one call of either kind for ever, blocks decide invites and group rings, and a group
/// call's changes are written so that its history survives a restart.
///
/// No I/O, no threads, no clock of its own: inputs in, outcomes and effects out, like the routers
/// it holds (pure values). A decision that needs the database (has this call id ever been used?)
/// is not made here: `handle` answers `.needsHistory`, the caller asks the store off the network
/// thread and comes back with the answer (`history`). A class, owned by the hub: the parts of the
/// hub share it, and no caller holds it borrowed while effects run (an SFU may answer at once,
/// re-entering the hub).
package final class CallDesk {
  package private(set) var router: CallRouter
  package private(set) var groups: GroupCallRouter
  private var blocks = BlockTable()
  /// Whether this server has an SFU (group calls are refused clearly without one).
  private let groupCalls: Bool
  /// Every call id this server's store holds plus every id the desk let a call start with since,
  /// when this server is the only one that records ids (a single server): an id it certainly
  /// does not hold is new, decided without the store. Nil: every new id is asked about.
  package private(set) var usedIds: UsedCallIdFilter?

  package init(router: CallRouter, groups: GroupCallRouter, groupCalls: Bool, usedIds: UsedCallIdFilter? = nil) {
    self.router = router
    self.groups = groups
    self.groupCalls = groupCalls
    self.usedIds = usedIds
  }

  /// What the store said about a call id the desk asked for (`.needsHistory`).
  package enum History: Sendable, Equatable {
    /// Not asked (the request names no new call, or the desk knows the id).
    case notAsked
    case checked(CallID, used: Bool)
    /// The store could not answer.
    case unavailable(CallID)
  }

  /// Where a call runs changed (a cluster's placement is told; a single server ignores it).
  package enum PlacementNote: Sendable, Equatable {
    /// A call started here, between these users.
    case running(CallID, users: [String])
    /// A call here was accepted: its users are busy.
    case answered(CallID)
  }

  package enum Decision {
    case outcome(CallRouter.Outcome, placement: PlacementNote?)
    /// The request starts a call whose id this desk does not hold: ask the store whether any call
    /// ever had it, then call `handle` again with the answer.
    case needsHistory(CallID)
  }

  // MARK: - Requests

  package func handle(
    _ message: ClientMessage, id: String, from who: Identity, now: Date, history: History = .notAsked
  ) -> Decision {
    guard message.type.isGroupCall else { return handleOneToOne(message, id: id, from: who, now: now, history) }
    guard groupCalls else {
      return refusal(
        id, .invalidState, "group calls are not enabled on this server (it has no SFU configured)",
        callId: message.callId)
    }
    let newCallId: CallID?
    switch message {
    case .groupCreate(let m): newCallId = m.callId
    case .roomJoin(let m): newCallId = m.callId
    default: newCallId = nil
    }
    if let newCallId, router.calls[newCallId] != nil {
      return refusal(id, .conflict, "callId is already used by another call", callId: newCallId)
    }
    if let newCallId, !groups.knows(newCallId) {
      if let refused = usedBefore(newCallId, id: id, history) { return refused }
    }
    let blocks = blocks
    var outcome = groups.handle(message, id: id, from: who, now: now) { blocks.blocks($0, $1) }
    switch (message, outcome.reply) {
    case (.groupOffer, _), (.groupAnswer, _), (.groupCandidate, _), (.groupEndOfCandidates, _), (.groupRestart, _),
      (_, .error):
      break  // negotiation, or refused: nothing the history keeps changed
    default:
      if let callId = message.callId { outcome.effects = persistingGroup(outcome.effects, callId, now: now) }
    }
    return .outcome(outcome, placement: nil)
  }

  private func handleOneToOne(
    _ message: ClientMessage, id: String, from who: Identity, now: Date, _ history: History
  ) -> Decision {
    guard case .invite(let invite) = message else {
      let outcome = router.handle(message, id: id, from: who, now: now)
      if case .accept(let accept) = message, case .ack = outcome.reply {
        return .outcome(outcome, placement: .answered(accept.callId))
      }
      return .outcome(outcome, placement: nil)
    }
    // An id the router no longer holds is checked against the history (pruned first, so that the
    // router cannot take a call it is about to forget for a new one).
    router.pruneEnded(now: now)
    if router.calls[invite.callId] == nil {
      if groups.knows(invite.callId) {
        return refusal(id, .conflict, "callId is already used by another call", callId: invite.callId)
      }
      if let refused = usedBefore(invite.callId, id: id, history) { return refused }
    }
    let outcome = router.handle(message, id: id, from: who, now: now, blocked: blocks.blocks(invite.to, who.userId))
    if case .ack = outcome.reply, router.calls[invite.callId]?.isEnded == false {
      return .outcome(outcome, placement: .running(invite.callId, users: [who.userId, invite.to]))
    }
    return .outcome(outcome, placement: nil)
  }

  /// `CallRouter.plainCandidateTarget`: the device a plain relayed candidate goes to, or nil
  /// when `handle` must decide it (a candidate is a 1:1 message: nothing else of the desk's
  /// applies to it).
  package func plainCandidateTarget(_ callId: CallID, from who: Identity, now: Date) -> CallRouter.PlainTarget? {
    router.plainCandidateTarget(callId, from: who, now: now)
  }

  /// Call ids are unique for ever: one that any call ever had (in the history, even long after it
  /// left memory) is refused. Nil: the id is new, go on — and it is in `usedIds` from now on,
  /// before any outcome of the request is released (whether or not a call then starts with it:
  /// an id added and not used costs a look-up in the store at worst).
  private func usedBefore(_ callId: CallID, id: String, _ history: History) -> Decision? {
    switch history {
    case .checked(callId, let used):
      if used { return refusal(id, .conflict, "callId was already used by another call", callId: callId) }
    case .unavailable(callId):
      return refusal(id, .internal, "cannot check the call id now; try again", callId: callId)
    default:
      guard usedIds?.mayContain(callId) == false else { return .needsHistory(callId) }
    }
    usedIds?.insert(callId)
    return nil
  }

  private func refusal(_ id: String, _ code: ErrorCode, _ text: String, callId: CallID?) -> Decision {
    .outcome(.init(reply: .error(.init(replyTo: id, code: code, message: text, callId: callId))), placement: nil)
  }

  // MARK: - Timers, devices and the SFU

  /// Whether this desk runs the call (live or recently ended).
  package func runs(_ callId: CallID) -> Bool {
    router.calls.contains(callId) || groups.knows(callId)
  }

  package func timerFired(_ timer: CallTimer, now: Date) -> [CallEffect] {
    guard groups.knows(timer.callId) else { return router.timerFired(timer, now: now) }
    return persistingGroup(groups.timerFired(timer, now: now), timer.callId, now: now)
  }

  /// A device has a socket again (`newSession`: not a resume, so it is rung again).
  package func deviceConnected(_ who: Identity, newSession: Bool, now: Date) -> [CallEffect] {
    router.deviceConnected(who, newSession: newSession, now: now) + groups.deviceConnected(who, newSession: newSession)
  }

  package func deviceDisconnected(_ who: Identity, now: Date) -> [CallEffect] {
    router.deviceDisconnected(who, now: now) + groups.deviceDisconnected(who)
  }

  /// The SFU lost the call's media: it ends for everyone.
  package func mediaFailed(_ callId: CallID, now: Date) -> [CallEffect] {
    persistingGroup(groups.mediaFailed(callId, now: now), callId, now: now)
  }

  /// The SFU saw a device leave by itself.
  package func participantLeftMedia(_ callId: CallID, _ who: Identity, now: Date) -> [CallEffect] {
    persistingGroup(groups.participantLeftMedia(callId, who, now: now), callId, now: now)
  }

  /// The SFU saw a device enter the room: one that is not in the call is taken out again.
  package func participantEnteredMedia(_ callId: CallID, _ who: Identity) -> [CallEffect] {
    groups.isJoined(who, in: callId) ? [] : [.sfu(.leave(callId: callId, participant: who))]
  }

  package func roomFinished(_ callId: CallID, now: Date) -> [CallEffect] {
    persistingGroup(groups.roomFinished(callId, now: now), callId, now: now)
  }

  /// Whether an SFU result for `who` still matters (the device may have left meanwhile).
  package func isJoined(_ who: Identity, in callId: CallID) -> Bool { groups.isJoined(who, in: callId) }

  // MARK: - Restarts and other nodes

  package func restore(_ stored: [StoredLiveCall], ended: [RecentlyEndedCall], now: Date) -> [CallEffect] {
    router.restore(stored, ended: ended, now: now)
  }

  package func catchUp(_ callIds: [CallID]) -> [CallEffect] { router.catchUp(callIds) }

  package func relinquish(_ callId: CallID) -> [CallEffect] {
    groups.knows(callId) ? groups.relinquish(callId) : router.relinquish(callId)
  }

  /// Group calls another node ran, taken over from the shared journal (`GroupCallRouter.adopt`).
  package func adoptGroups(_ stored: [StoredGroupCall], now: Date) -> [CallEffect] {
    var effects: [CallEffect] = []
    for call in stored where router.calls[call.snapshot.callId] == nil {
      effects += groups.adopt(GroupCallRouter.Call(restoring: call.snapshot), now: now)
    }
    return effects
  }

  // MARK: - Blocks and queries

  package func loadBlocks(_ pairs: [(userId: String, blockedId: String)]) { blocks = BlockTable(pairs) }

  package func setBlock(_ userId: String, blocks other: String, _ on: Bool) {
    blocks.set(userId, blocks: other, on)
  }

  package func callState(_ callId: CallID, visibleTo who: Identity) -> CallState? {
    router.callState(callId, visibleTo: who)
  }

  package func groupState(_ callId: CallID, visibleTo who: Identity) -> GroupCallState? {
    groups.state(callId, visibleTo: who)
  }

  // MARK: - Group calls on disk

  /// What a group call's change leaves on disk: the record the call would leave if the server
  /// stopped now (group calls do not outlive a single server's restart: it is completed on
  /// start) with the call's state (for a cluster node that takes it over), or its final record
  /// once it ended.
  private func persistingGroup(_ effects: [CallEffect], _ callId: CallID, now: Date) -> [CallEffect] {
    var persisted = effects
    let silenced = groups.silencedMembers(of: callId)
    for case .external(.groupEnded(let record)) in effects {
      persisted.append(.persist(.groupEnded(record, silenced: silenced)))
    }
    if let live = groups.recordIfInterrupted(callId, now: now) {
      persisted.append(.persist(.groupLive(live, silenced: silenced, state: groups.snapshot(of: callId))))
    }
    return persisted
  }
}
