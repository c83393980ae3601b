/// The sessions a node holds in a cluster with write-behind (docs/architecture.md, "Next:
/// write-behind sessions"): the node numbers their messages itself, writes a relayed candidate at
/// once and stores it after, and writes every other message only once Redis has it.
///
///     node:     live(renewed at) ──no renewal for lease − margin──▶ stale ──renewed──▶ live (no sessions)
///
///     a frame:  numbered ─┬─ candidate, nothing held before it ──▶ written ─┐
///                         └─ store-first, or behind a held frame ─▶ held ───┤
///               queued ──batch cut──▶ in flight ──stored──▶ confirmed (held frames written)
///                                          ├──refused──▶ the session closes here
///                                          └──failed───▶ queued again (cut at the next tick)
///
/// A session's frames are written in seq order and stored in seq order; a batch takes whole
/// events from the front of the queue, so a request's answer (a store-first frame) is written
/// only once everything the request caused, in any session, is stored with it or before it.
/// One batch is in flight at a time: the events that arrive meanwhile make the next one (group
/// commit at no cost to a relayed copy, which was already written). With a batch window, a queue
/// of frames that may wait (candidates, and the answers to them: protocol.md §5.1 lets those
/// wait 40 ms) is sent when its oldest event has waited the window, or when it fills a batch;
/// any other frame is sent at once.
///
/// The ack to a relayed candidate is the one answer not numbered nor stored (`UnstoredAnswer`):
/// it waits for its event, like a stored answer, and is then written without a seq. Each relayed
/// candidate so costs Redis one session entry (the peer's copy), not two.
///
/// A pure value: every input returns the effects for the shell to apply, and time comes in as
/// monotonic instants, so tests drive it with virtual time.
package struct WriteBehindHolder: Sendable {
  package struct Limits: Sendable, Equatable {
    /// How long Redis keeps this node counted alive after a renewal, and how long before that the
    /// holder stops writing (its clock and Redis's may drift, and a close takes a moment).
    package var lease: Duration
    package var margin: Duration
    /// Frames numbered but not confirmed, per session and for the whole node (bytes as
    /// `Numbered.cost` counts them: what they hold in memory). A relayed candidate's event that
    /// would pass a session's bounds is refused whole after it was handled (`submit`: nothing
    /// numbered, the shell answers `rate-limited`, the client sends it again). Past the node's, a
    /// request of this node's own client is refused before it is handled (`admit`: the hub
    /// answers `rate-limited`, nothing changed), and one admitted is numbered whatever came
    /// meanwhile; a relayed candidate is not asked (it moves no state: refused after, as above);
    /// an event no request was admitted for (a timer's, a forwarded request's) is refused whole
    /// (its sessions resync). Letters are never refused (their sender was answered)
    /// but the node reads no more of its inbox while over its bound (`acceptsLetters`).
    package var maxSessionFrames: Int
    package var maxSessionBytes: Int
    package var maxNodeBytes: Int
    /// A batch's size: it takes whole events until one more would pass either (at least one).
    package var maxBatchFrames: Int
    package var maxBatchBytes: Int
    /// How long frames that may wait are held for more to share their batch (Redis's cost per
    /// message falls with the events per batch: docs/benchmarks.md); zero sends at once.
    package var batchWindow: Duration
    /// Once-keys remembered per session (`WriteBehindOnces`), as the ledger remembers them.
    package var onceMemory: Int
    /// Answers to forwarded requests waiting for their events to be stored (the shell's queue,
    /// `WriteBehindShell.flush(replies:)`): an answer whose event caused nothing here waits
    /// behind an earlier one to the same requester and is held by no byte bound. An event's
    /// answers that would pass it are dropped, as over the node's bound (the hub forgets them, the
    /// request forwarded again is handled afresh). 65,536: an answer holds its frame, its letter
    /// and their ids, under a kilobyte, so about the node's 64 MiB at most; in normal operation an
    /// answer waits one batch (the window and a round trip), far fewer.
    package var maxWaitingReplies: Int
    /// A request is admitted before it is handled (`admit`) with room kept for what it may cause
    /// here: this many copies of its bytes (and an answer's worth each), counted as `Numbered.cost`
    /// counts them (twice: the frame and its bytes). Eight: a message copied to a few devices of a
    /// few users, with its answer; an event bigger than its room is numbered all the same (the
    /// request was handled), and only what passes its room is held past the node's bound.
    package var admissionCopies: Int
    /// How long room kept for an admitted request waits for its event (a request answered off
    /// the store's path, or its session lost here, leaves it unclaimed): then it is let go.
    package var admissionHold: Duration

    package init(
      lease: Duration, margin: Duration, maxSessionFrames: Int = 256, maxSessionBytes: Int = 256 << 10,
      maxNodeBytes: Int = 64 << 20, maxBatchFrames: Int = 512, maxBatchBytes: Int = 1 << 20,
      batchWindow: Duration = .zero, onceMemory: Int = 256, maxWaitingReplies: Int = 1 << 16,
      admissionCopies: Int = 8, admissionHold: Duration = .seconds(30)
    ) {
      self.lease = lease
      self.margin = margin
      self.maxSessionFrames = max(1, maxSessionFrames)
      self.maxSessionBytes = max(1, maxSessionBytes)
      self.maxNodeBytes = max(1, maxNodeBytes)
      self.maxBatchFrames = max(1, maxBatchFrames)
      self.maxBatchBytes = max(1, maxBatchBytes)
      self.batchWindow = max(.zero, batchWindow)
      self.onceMemory = max(1, onceMemory)
      self.maxWaitingReplies = max(1, maxWaitingReplies)
      self.admissionCopies = max(1, admissionCopies)
      self.admissionHold = max(.zero, admissionHold)
    }

    /// The room `admit` keeps for a request of `bytes`.
    package func admissionBytes(forRequestOf bytes: Int) -> Int {
      admissionCopies * 2 * (max(0, bytes) + Self.answerBytes)
    }

    /// An answer's frame and a copy's envelope, at most (an invite's answer carries the ICE servers).
    static let answerBytes = 1024
  }

  package typealias Instant = ContinuousClock.Instant

  /// How a frame may reach the socket.
  package enum Kind: Sendable, Equatable {
    /// A relayed candidate: idempotent, and its sender retries it until answered, so it is
    /// written at once and stored after (unless a held frame is before it in its session).
    case candidate
    /// Everything else (answers, invites, accepts, ends): written only once stored.
    case storeFirst
  }

  /// A message for a session before the holder numbers it.
  package struct Outgoing: Sendable, Equatable {
    package let session: String
    package let frame: SessionLedger.Frame
    package let kind: Kind
    package let requestID: String?
    /// Whether its store may wait for the batch window: a candidate (written already), or the
    /// answer to one (`ClientMessageType.rules`: its ack may wait).
    package let mayWait: Bool
    /// What makes it news for the session (`OnceKey`): a message whose key the session had
    /// already is not numbered again.
    package let once: String?
    /// The inbox position of the letter it came in (nil: this node's own client caused it). A
    /// letter of a session this node loses is never sent on: whoever resumes the session applies
    /// every letter its inbox holds for it after the session's stored letter position
    /// (`SessionLedger.resumeHolding`), so this node keeps it in its inbox until then (`retained`).
    package let letter: String?

    package init(
      session: String, frame: SessionLedger.Frame, kind: Kind, requestID: String? = nil, mayWait: Bool? = nil,
      once: String? = nil, letter: String? = nil
    ) {
      self.session = session
      self.frame = frame
      self.kind = kind
      self.requestID = requestID
      self.mayWait = mayWait ?? (kind == .candidate)
      self.once = once
      self.letter = letter
    }

    /// As it arrived at `position` of the inbox.
    func arrived(at position: String) -> Outgoing {
      Outgoing(
        session: session, frame: frame, kind: kind, requestID: requestID, mayWait: mayWait, once: once,
        letter: position)
    }

    /// Written only once stored: numbered where the hub may not know its session yet (`hold`).
    var storedFirst: Outgoing {
      Outgoing(
        session: session, frame: frame, kind: .storeFirst, requestID: requestID, mayWait: false, once: once,
        letter: letter)
    }
  }

  /// A letter this node read but did not store for its session (it did not hold it, or lost it
  /// before its batch landed): kept in the inbox (the trim point stops before the first) for the
  /// session's next resume, which applies it; numbered here if this node holds the session again
  /// with the letter after its cut (it arrived after that resume: `hold`).
  package struct Retained: Sendable, Equatable {
    package let position: InboxPosition
    package let outgoing: Outgoing
  }

  /// Why a session is no longer held here.
  package enum Closing: Sendable, Equatable {
    /// Redis refused its frames (`WriteBehindBatch.Refusal`): another node has it, or it is gone.
    case refused(WriteBehindBatch.Refusal)
    /// This node's lease may have run out: another node may take the session any moment.
    case stale
  }

  package enum Effect: Sendable, Equatable {
    /// Write these bytes to the session's socket (or keep them for its return): seqs in order.
    case write(session: String, seq: UInt64, bytes: [UInt8])
    /// Send this batch to Redis; its result comes back as `batchStored` or `batchFailed`.
    case store(WriteBehindBatch)
    /// Call `tick` at this instant: the batch window of the frames queued ends then.
    case wake(at: Instant)
    /// Close the session's socket; it is not held here any more (its client resumes elsewhere).
    case close(session: String, Closing)
    /// A frame this node's own client caused for a session not held here (any more): the shell
    /// stores it the way other nodes do, where the session is now. Never a letter (`retained`).
    case unheld(Outgoing)
    /// Every event numbered through `through` is stored (or needs storing no more: its sessions
    /// were lost here and their own frames went on as `unheld` before this effect): an answer
    /// that waited for one of them may go (`WriteBehindShell.flush(replies:)`).
    case eventsStored(through: UInt64)
    /// The lease lapsed: the events numbered through `through` that were not stored never will be
    /// by this node (their sessions closed here).
    case eventsDropped(through: UInt64)
    /// The answer to a relayed candidate may be written, without a seq: what its event caused
    /// here is stored (or went on as `unheld` before this effect). The shell writes it only after
    /// the Redis steps queued before it (the copies for sessions held elsewhere) are done.
    case answer(UnstoredAnswer)
  }

  /// The answer to a relayed candidate of a session held here (`submit`'s `answers`): an `ack`
  /// without a `seq`, never numbered nor stored (protocol.md §4.2). The candidate is idempotent
  /// (its copies carry a once-key), so the request sent again is handled afresh: a copy already
  /// stored is not stored twice, and one that was not is. Its frame costs the session's store
  /// nothing; it is written only once the copies its event caused are stored, as a stored answer
  /// would be.
  package struct UnstoredAnswer: Sendable, Equatable {
    package let session: String
    package let requestID: String
    /// The whole frame, without a seq.
    package let bytes: [UInt8]

    package init(session: String, requestID: String, bytes: [UInt8]) {
      self.session = session
      self.requestID = requestID
      self.bytes = bytes
    }
  }

  /// What `submit` did: the effects (among them the closes of a lease that just went stale),
  /// and, when set, why nothing of the event was numbered.
  package struct Submitted: Sendable, Equatable {
    package var effects: [Effect]
    package var refusal: Refusal?
    /// The number the event was queued under (`QueuedEvent.number`); nil when nothing of it was
    /// queued (refused, or every frame a repeat or for a session not held here).
    package var event: UInt64?
    /// The sessions of an event refused over the node's bound whose request had changed the
    /// call's state already (not a relayed candidate): sent again, it would find the call moved
    /// on without its messages, so these sessions must resync (the shell has them made
    /// unresumable and closed, as a message Redis failed to take does under store-first).
    package var resyncing: [String]

    package init(effects: [Effect], refusal: Refusal?, resyncing: [String] = [], event: UInt64? = nil) {
      self.effects = effects
      self.refusal = refusal
      self.resyncing = resyncing
      self.event = event
    }
  }

  /// Why a client's event was refused whole.
  package enum Refusal: Sendable, Equatable {
    /// Too much waits for Redis (`Limits`): try again shortly.
    case backlog
    /// This node's lease may have run out: it takes nothing until it renews.
    case stale
  }

  /// The node's lease, by its own monotonic clock.
  package enum Lease: Sendable, Equatable {
    /// `renewedAt`: when the last successful renewal was sent (Redis counts the lease from when it
    /// ran it, which is later: counting from the send errs on the safe side).
    case live(renewedAt: Instant)
    /// No renewal within the lease less the margin: nothing is written, no session held.
    case stale
  }

  /// One session held here. `unstored` holds seqs `stored + 1 ..< next` in order; `written` is
  /// the last seq handed to the socket (beyond `stored` only through candidates).
  package struct Held: Sendable, Equatable {
    package let epoch: UInt64
    package var next: UInt64
    package var stored: UInt64
    package var written: UInt64
    package var unstored: [Numbered] = []
    package var unstoredBytes = 0
    /// The once-keys of what it stored before this node held it, and of what this node numbered.
    package var onces: WriteBehindOnces
    /// The resume that made this holding applied this node's letters for the session through here
    /// (`SessionLedger.resumeHolding`): the reader's copies of them are not numbered again.
    package var lettersAfter: InboxPosition?
    /// Whether the hub has the session as held now (`announced`): until then a candidate is not
    /// written before it is stored, since the write would reach the socket of the session this
    /// holding replaces (a resume on this node), or no session (a resume from another node).
    package var announced = false
  }

  /// `outgoing` is kept to number it again elsewhere if another node takes its session.
  package struct Numbered: Sendable, Equatable {
    package let seq: UInt64
    package let bytes: [UInt8]
    package let outgoing: Outgoing

    package var kind: Kind { outgoing.kind }
    package var requestID: String? { outgoing.requestID }
    /// What it holds in memory, as the bounds count it: its bytes and the unnumbered frame.
    package var cost: Int { bytes.count + outgoing.frame.head.count + outgoing.frame.tail.count }
  }

  /// The store's state: at most one batch in flight.
  package enum Store: Sendable, Equatable {
    case idle
    /// `events`: what the batch took from the queue, put back in front if it fails.
    case inFlight(number: UInt64, events: [QueuedEvent])
    /// The last batch failed: the next one is cut at the next tick, not at once, so a Redis that
    /// is down is not asked again for every event.
    case failed
  }

  /// A numbered frame in the queue. The epoch tells it from a frame of the same session held
  /// again since (a resume on this node): such a frame is no longer this node's to store.
  package struct FrameRef: Sendable, Equatable {
    package let session: String
    package let epoch: UInt64
    package let seq: UInt64
  }

  /// One event's frames, in the order they were numbered; when it was queued, and whether it
  /// has a frame that may not wait for the batch window. `number` counts the events queued (from
  /// 1): a batch takes whole events from the front of the queue and a failed one puts them back
  /// in front, so the events stored are always those through some number (`storedThrough`).
  package struct QueuedEvent: Sendable, Equatable {
    package var number: UInt64 = 0
    package var frames: [FrameRef]
    package let queuedAt: Instant
    package let urgent: Bool
  }

  package let limits: Limits
  package private(set) var lease: Lease
  /// Unstored answers, each waiting for the events through `through` to be stored, in the order
  /// they were given (their `through` never falls); their bytes count in `nodeBytes`.
  private var answers: [(through: UInt64, answer: UnstoredAnswer)] = []
  /// Unstored answers waiting (tests).
  package var answersWaiting: Int { answers.count }
  /// How many times the lease lapsed. A lapse a renewal finds (`leaseRenewed`) is over by the
  /// time the shell next looks at `lease`, so the shell reports lapses by this count.
  package private(set) var lapses = 0
  package private(set) var sessions: [String: Held] = [:]

  /// Whether the session is held here. Asked for every frame: `sessions[id] != nil` copies the
  /// whole `Held` out (its queue and once-keys retained, then released) to compare it with nil.
  package func isHeld(_ session: String) -> Bool { sessions.index(forKey: session) != nil }
  package private(set) var store: Store = .idle
  private var queue: [QueuedEvent] = []
  /// Of the queue: frames, and events that may not wait (kept as counts: every event asks).
  private var queuedFrames = 0
  private var urgentEvents = 0
  /// The last `wake` asked for, so that it is asked once.
  private var wakeAsked: Instant?
  private var nodeBytes = 0
  private var batchNumber: UInt64 = 0
  /// The last event number given (`QueuedEvent.number`), and the last one through which every
  /// event is stored (or dropped, the lease having lapsed), as last reported (`eventsStored`).
  package private(set) var eventsNumbered: UInt64 = 0
  package private(set) var storedThrough: UInt64 = 0
  /// The last event something waits for (`awaitStored`): only then are `eventsStored` and
  /// `eventsDropped` reported.
  private var awaited: UInt64 = 0
  /// Frames numbered again in a new event (`renumber`): until `until` is stored, the events are
  /// reported stored no further than `through`, where they were then (the frames' first events,
  /// not stored, may be cut or answered first).
  private var renumbered: [(through: UInt64, until: UInt64)] = []
  /// This node's own frames of a session held here again after another node numbered it, some
  /// of them in the batch in flight (`hold`): numbered again under `epoch` once that batch is
  /// answered, all of them if Redis refused the session's frames (or the batch failed: it is not
  /// sent again for them), else those the batch did not carry. At most one per session held.
  private var awaiting: [Awaiting] = []

  private struct Awaiting: Sendable, Equatable {
    let batch: UInt64
    let session: String
    var epoch: UInt64
    let frames: [Numbered]
    let flying: Set<UInt64>
  }
  /// In inbox order; bounded by `maxNodeBytes` on their own (the oldest go first, counted in
  /// `retainedDropped`): they wait for a client's resume, so they must not pause the inbox.
  package private(set) var retained: [Retained] = []
  private var retainedBytes = 0
  package private(set) var retainedDropped = 0

  /// A request admitted before the hub handled it (`admit`), by its session and id: its event
  /// (the one with its answer) is numbered whatever the node's bound, in the room kept for it.
  package struct Admitted: Hashable, Sendable {
    package let session: String
    package let requestID: String

    package init(session: String, requestID: String) {
      self.session = session
      self.requestID = requestID
    }
  }

  private struct Room: Sendable {
    let bytes: Int
    let at: Instant
  }

  /// The room kept for admitted requests whose events have not come yet, and its sum: counted
  /// with `nodeBytes` against the node's bound by `admit`, by events no request was admitted for,
  /// and by `acceptsLetters`.
  private var rooms: [Admitted: Room] = [:]
  package private(set) var reservedBytes = 0

  package init(limits: Limits, renewedAt: Instant) {
    self.limits = limits
    lease = .live(renewedAt: renewedAt)
  }

  /// Whether the shell should read more of its inbox now.
  package var acceptsLetters: Bool { lease != .stale && nodeBytes + reservedBytes < limits.maxNodeBytes }

  /// Admission, asked before the hub handles a request of this node's own client (`bytes`: the
  /// request's size): whether the node can take what it may cause. If so, room is kept for it
  /// (`Limits.admissionBytes`) until its event comes (`submit`: the event with its answer), which is
  /// then never refused over the node's bound, whatever was numbered meanwhile (letters, which are
  /// never refused, included: they do not count against the room kept, and the reader stops once
  /// they and it reach the bound). If not, the hub answers `rate-limited` without handling the
  /// request: no call's state moved, nothing was numbered, and the client sends it again.
  /// Only the node's bound is checked here, and a relayed candidate is not asked (`RequestPipeline`):
  /// its event is still refused after it is handled when it would pass its session's bounds or
  /// the node's (harmless: it moves no call's state, and is handled again when sent again). With the lease stale nothing is held, so nothing is kept: the event finds it stale.
  package mutating func admit(_ requestID: String, of session: String, bytes: Int, now: Instant) -> Bool {
    guard lease != .stale else { return true }
    let key = Admitted(session: session, requestID: requestID)
    guard rooms[key] == nil else { return true }
    let room = limits.admissionBytes(forRequestOf: bytes)
    // An empty node takes any request (a bound below one request's room would take none).
    guard nodeBytes + reservedBytes == 0 || nodeBytes + reservedBytes + room <= limits.maxNodeBytes else {
      return false
    }
    rooms[key] = Room(bytes: room, at: now)
    reservedBytes += room
    return true
  }

  /// Admitted requests whose events have not come yet (tests).
  package var admittedWaiting: Int { rooms.count }

  // MARK: Sessions

  /// The node won the session (an `open` or `resume` gave it `epoch`); `lastSeq` is the last seq
  /// stored, from which numbering continues; `onces` the once-keys of the frames Redis stored
  /// for it (`WriteBehindStore.claim`).
  ///
  /// A session held here already (its client resumed on this node) keeps what this node had
  /// numbered for it and Redis does not have: its frames after `lastSeq` are numbered again
  /// under the new epoch, in order, after `lastSeq`, and written once stored. Those of the old
  /// epoch are no longer stored (a queued frame is dropped from its batch; a batch sent before
  /// is refused for the session, or landed before the resume, and then `lastSeq` covers it); at
  /// or below `lastSeq` a frame is stored, or a candidate the client said it processed (the
  /// resume went on from its own seq). Without this, a frame waiting for its batch (the window,
  /// the batch in flight, a failed one) during the resume was lost, its sender answered. When the
  /// epoch moved on by more than this resume's step, another node numbered the session between
  /// the two holdings (its client resumed there and came back before this node heard of it):
  /// then every frame of its own Redis does not have is numbered again, whatever its seq, once
  /// the batch in flight, if it carries some, is answered (`awaiting`).
  ///
  /// A resume (`SessionLedger.resumeHolding`) hands over `letters`, those its previous holder
  /// (this node or another, dead or alive) had not stored, each at the position of the copy the
  /// resume made in this node's inbox (`origins`: where it was read, one each, or none), and
  /// `lettersAfter`, the newest entry of this node's inbox after those copies: they are numbered
  /// first, then letters this node retained for the session after the cut (they arrived between
  /// the resume and this call); the reader's copies of letters at or before the cut are not
  /// numbered again. All of them, and the frames numbered again, are written once stored (the
  /// hub learns of the resume after this: a write now would reach the session it replaces, or
  /// none). `storedRequests`: the request ids whose answers Redis has (the resume's replies). When
  /// this node held the session just before (the previous holder), a letter it had
  /// numbered at or below `lastSeq` is one the client processed (a candidate written before it
  /// was stored): it is not numbered again, nor a repeat of it; one above is, its once-key no
  /// obstacle. If the lease is stale the letters are retained (their copies stay in the inbox for
  /// the session's next resume).
  package mutating func hold(
    _ session: String, epoch: UInt64, lastSeq: UInt64, onces: [String] = [], lettersAfter: String? = nil,
    letters: [Outgoing] = [], letterOrigins: [String] = [], storedRequests: Set<String> = [], now: Instant
  ) -> [Effect] {
    var effects = checkLease(now)
    guard lease != .stale else {
      // Not held: its letters wait in the inbox for the session's next resume.
      for letter in letters { retain(letter) }
      return effects + [.close(session: session, .stale)]
    }
    let cut = lettersAfter.flatMap(InboxPosition.init)
    // The cut applies from after the resume's own letters, which are at or before it.
    var held = Held(
      epoch: epoch, next: lastSeq + 1, stored: lastSeq, written: lastSeq,
      onces: WriteBehindOnces(capacity: limits.onceMemory, keys: onces), lettersAfter: nil)
    var again: [Outgoing] = []
    // Frames waiting for a batch's answer from an earlier holding here wait for this one now.
    for index in awaiting.indices where awaiting[index].session == session { awaiting[index].epoch = epoch }
    // Letters this node numbered for the session before and its client processed (by where they
    // were in the inbox), and the once-keys to add only after the resume's letters.
    var processed: Set<InboxPosition> = []
    var oncesAfterLetters: WriteBehindOnces?
    if let old = sessions[session] {
      nodeBytes -= old.unstoredBytes
      // This node's own frames only: its letters not stored are among the resume's `letters`.
      let own = old.unstored.filter { $0.outgoing.letter == nil }
      if old.epoch + 1 == epoch {
        // This node was the previous holder: the resume read its inbox, and `letters` holds
        // every letter it had numbered and not stored. Those the client processed are not
        // numbered again (nor a repeat of them); the others are, whatever the keys this node
        // remembered for them.
        for frame in old.unstored where frame.seq <= lastSeq {
          if let key = frame.outgoing.once { _ = held.onces.insert(key) }
          if let at = frame.outgoing.letter.flatMap(InboxPosition.init) { processed.insert(at) }
        }
        oncesAfterLetters = old.onces
        again = own.filter { $0.seq > lastSeq }.map { $0.outgoing.storedFirst }
      } else {
        held.onces.formUnion(old.onces)
      }
      if old.epoch + 1 != epoch, old.epoch != epoch {
        // Another node numbered the session between the two holdings here (its client resumed
        // elsewhere and came back before this node heard of it): Redis's seqs up to `lastSeq`
        // are partly that node's, and say nothing of this node's frames. Those Redis never had
        // are numbered again after `lastSeq` whatever their seq; those in the batch in flight
        // may have landed before the other node's resume, so everything waits for its answer.
        let flying = inFlightSeqs(session, epoch: old.epoch)
        if flying.isEmpty || !own.contains(where: { flying.contains($0.seq) }) {
          // Nothing in flight, but a batch that failed may have landed before the other node's
          // resume: a frame whose once-key or answered request Redis has was stored, and with it
          // every frame before it (a session's frames are stored in seq order, whole per batch).
          let redisOnces = Set(onces)
          let proven = own.filter { frame in
            frame.outgoing.once.map(redisOnces.contains) == true
              || frame.outgoing.requestID.map(storedRequests.contains) == true
          }.map(\.seq).max()
          again = own.filter { frame in proven.map { frame.seq > $0 } ?? true }.map { $0.outgoing.storedFirst }
        } else if case .inFlight(let number, _) = store {
          awaiting.append(
            Awaiting(
              batch: number, session: session, epoch: epoch,
              frames: own, flying: flying))
        }
      }
    }
    let parked = retained.filter { entry in entry.outgoing.session == session && cut.map { entry.position > $0 } ?? true
    }
    forgetRetained { $0.outgoing.session == session }
    sessions[session] = held
    if !again.isEmpty { effects += renumber(again, now: now) }
    let fresh = letters.indices.filter { index in
      !(index < letterOrigins.count && InboxPosition(letterOrigins[index]).map(processed.contains) == true)
    }
    if !fresh.isEmpty {
      effects += number(fresh.map { letters[$0].storedFirst }, now: now, checkingOnces: true)
    }
    if let oncesAfterLetters { sessions[session]?.onces.formUnion(oncesAfterLetters) }
    sessions[session]?.lettersAfter = cut
    if !parked.isEmpty {
      effects += number(parked.map { $0.outgoing.storedFirst }, now: now, checkingOnces: true)
    }
    effects += cutIfIdle(now)
    return effects
  }

  /// The hub has the session held at `epoch` now (the shell says so once the hub has had the
  /// open's or resume's answer): candidates numbered since wait no more for their store.
  package mutating func announced(_ session: String, epoch: UInt64) -> [Effect] {
    guard let index = sessions.index(forKey: session), sessions.values[index].epoch == epoch,
      !sessions.values[index].announced
    else { return [] }
    sessions.values[index].announced = true
    var effects: [Effect] = []
    Self.writeWaitingCandidates(&sessions.values[index], session, limits, &effects)
    return effects
  }

  /// The session ends here (its client said goodbye, its resume window passed, or another node
  /// resumed it): nothing more of it is written or stored here. What this node's own clients sent
  /// it and Redis does not have goes where the session is now (`unheld`: their senders may have
  /// been answered); its letters stay in the inbox for whoever resumes it (`retained`).
  package mutating func release(_ session: String) -> [Effect] {
    if !rooms.isEmpty { forgetRooms { key, _ in key.session == session } }
    guard let held = sessions.removeValue(forKey: session) else { return [] }
    nodeBytes -= held.unstoredBytes
    return lose(held, sendingOn: true)
  }

  /// The letters of the session retained for a resume that has happened (the shell checks Redis):
  /// they may leave the inbox.
  package mutating func forget(retained positions: Set<InboxPosition>) {
    forgetRetained { positions.contains($0.position) }
  }

  /// The first inbox position the inbox must keep (nil: none): a letter retained, or numbered
  /// and not stored yet. Every letter handed to `letter` is one of these until it is stored,
  /// applied by a resume already, or a repeat; so the inbox may be trimmed just before it.
  package var keepsFrom: InboxPosition? {
    var first = retained.first?.position
    for held in sessions.values {
      for frame in held.unstored {
        guard let at = frame.outgoing.letter.flatMap(InboxPosition.init) else { continue }
        if first.map({ at < $0 }) ?? true { first = at }
      }
    }
    return first
  }

  // MARK: Frames

  /// A client's request produced these frames (its answer among them, store-first): all are
  /// numbered, or none (`Refusal`). `answers`: the event's answers to relayed candidates, written
  /// without a seq once the event is stored (`Effect.answer`); when the event queued no frame
  /// here (its copies went to sessions held elsewhere, or were repeats), once every event
  /// numbered before it is stored (a repeat's first copy may be among them). A refused event's
  /// answers are not written (the shell answers its requests `rate-limited`).
  package mutating func submit(_ event: [Outgoing], answers: [UnstoredAnswer] = [], now: Instant) -> Submitted {
    var effects = checkLease(now)
    guard lease != .stale else { return Submitted(effects: effects, refusal: .stale) }
    // Only a relayed candidate's event may be refused over a session's bounds: the request was
    // handled already (the call's state moved on), and only a candidate's is harmless to handle
    // again when sent again. Any other event (an invite, an accept, an end) is numbered past them,
    // within the node's bound: refused, its repeat would find the call moved on without the
    // messages (an accept sent again is `conflict`, and the caller never hears of it). Past the
    // node's bound, a request of this node's own client was refused before it was handled
    // (`admit`); an event with no admitted request (a timer's, a request another node forwarded)
    // is still refused whole here, and its sessions resync (`resyncing`).
    let relay = !answers.isEmpty || event.contains { $0.kind == .candidate }
    // An event with the answer to a request admitted before it was handled (`admit`) takes the
    // room kept for it, and is not refused over the node's bound: its request changed state.
    var admitted = false
    if !rooms.isEmpty {
      for outgoing in event {
        guard let id = outgoing.requestID,
          let room = rooms.removeValue(forKey: Admitted(session: outgoing.session, requestID: id))
        else { continue }
        reservedBytes -= room.bytes
        admitted = true
      }
    }
    let answerBytes = answers.reduce(0) { $0 + $1.bytes.count }
    guard fits(event, sessionBounds: relay, nodeBound: !admitted, answerBytes: answerBytes) else {
      let resyncing = relay ? [] : Array(Set(event.map(\.session))).sorted()
      return Submitted(effects: effects, refusal: .backlog, resyncing: resyncing)
    }
    let before = eventsNumbered
    effects += number(event, now: now, checkingOnces: true)
    let queued = eventsNumbered > before ? eventsNumbered : nil
    effects += wait(answers, through: queued ?? eventsNumbered)
    return Submitted(effects: effects + cutIfIdle(now), refusal: nil, event: queued)
  }

  /// Answers written once the events through `through` are stored: at once when they are.
  private mutating func wait(_ given: [UnstoredAnswer], through: UInt64) -> [Effect] {
    guard !given.isEmpty else { return [] }
    guard through > storedThrough else { return given.map { .answer($0) } }
    for answer in given {
      answers.append((through, answer))
      nodeBytes += answer.bytes.count
    }
    return []
  }

  /// The answers whose events are stored through `storedThrough`, from the front.
  private mutating func answersDue() -> [Effect] {
    guard let first = answers.first, first.through <= storedThrough else { return [] }
    let count = answers.prefix { $0.through <= storedThrough }.count
    var effects: [Effect] = []
    effects.reserveCapacity(count)
    for (_, answer) in answers[..<count] {
      nodeBytes -= answer.bytes.count
      effects.append(.answer(answer))
    }
    answers.removeFirst(count)
    return effects
  }

  /// Something (an answer to a request another node forwarded: `WriteBehindShell.flush`) waits
  /// for the events through `event` to be stored: `eventsStored` says when they are (or
  /// `eventsDropped`, the lease lapsing first). Nothing is reported for events stored already.
  package mutating func awaitStored(through event: UInt64) {
    awaited = max(awaited, event)
  }

  /// A letter another node stored in this node's inbox, at `position`: numbered in inbox order,
  /// whatever the bounds (its sender was answered already).
  package mutating func letter(_ outgoing: Outgoing, position: String, now: Instant) -> [Effect] {
    var effects = checkLease(now)
    guard lease != .stale else {
      retain(outgoing.arrived(at: position))
      return effects
    }
    effects += number([outgoing.arrived(at: position)], now: now, checkingOnces: true)
    return effects + cutIfIdle(now)
  }

  // MARK: The store's answers

  /// Redis stored the batch, but for the sessions it refused. A session another node took
  /// (`superseded`) closes here and its frames not stored go to its new holder (`unheld`, in seq
  /// order: candidates its client may have seen arrive again, which protocol.md allows after a
  /// node's death), before any answer of the batch is written.
  package mutating func batchStored(
    _ number: UInt64, refused: [String: WriteBehindBatch.Refusal], now: Instant
  ) -> [Effect] {
    var effects = checkLease(now)
    guard case .inFlight(number, let events) = store else { return effects }
    store = .idle
    var through: [String: UInt64] = [:]
    through.reserveCapacity(events.reduce(0) { $0 + $1.frames.count })
    for event in events {
      for frame in event.frames where isCurrent(frame) {
        through[frame.session] = max(through[frame.session] ?? 0, frame.seq)
      }
    }
    let sorted = through.sorted { $0.key < $1.key }
    for (session, _) in sorted {
      guard let refusal = refused[session], let held = sessions.removeValue(forKey: session) else { continue }
      nodeBytes -= held.unstoredBytes
      effects.append(.close(session: session, .refused(refusal)))
      // Its own frames go where the session is now, unless it is gone (nobody to read them) or
      // the refusal is a gap (this node's own mistake); its letters wait for the resume.
      if refusal != .gone { effects += lose(held, sendingOn: refusal == .superseded) }
    }
    for (session, seq) in sorted where refused[session] == nil {
      effects += confirm(session, through: seq)
    }
    effects += settle(number, landed: { refused[$0] == nil }, now: now)
    effects += advance()
    return effects + cutIfIdle(now)
  }

  /// The batch may or may not be stored (Redis failed or the connection broke): its events go
  /// back in front of the queue, sent again at the next tick. Storing a frame twice is harmless
  /// (`WriteBehindStore` skips seqs already stored under the same epoch).
  package mutating func batchFailed(_ number: UInt64, now: Instant) -> [Effect] {
    let effects = checkLease(now)
    guard case .inFlight(number, let events) = store else { return effects }
    store = .failed
    queue.insert(contentsOf: events, at: 0)
    count(events, +1)
    // An old epoch's frames are not sent again (`isCurrent`): counted as not stored, they are
    // numbered again (a store-first frame may then arrive twice, rather than never).
    return effects + settle(number, landed: { _ in false }, now: now)
  }

  // MARK: The lease

  /// A renewal sent at `sentAt` succeeded.
  ///
  /// The lease is checked before the renewal counts: a node frozen past its lease (SIGSTOP, a
  /// long pause) may renew first thing on waking, before any tick or event checks it, and other
  /// nodes may have counted it dead meanwhile and taken its sessions and calls; it lapsed all the
  /// same, so it closes its sessions, then starts again with none.
  package mutating func leaseRenewed(sentAt: Instant, now: Instant) -> [Effect] {
    let lapsed = checkLease(now)
    switch lease {
    case .live(let renewedAt):
      lease = .live(renewedAt: max(renewedAt, sentAt))
    case .stale:
      // A renewal sent before the lapse and answered after it (a freeze between the two) does not
      // make the lease live: it would lapse again at once and be counted twice.
      guard now - sentAt < limits.lease - limits.margin else { return lapsed }
      // Every session was closed when it went stale: the node starts again with none.
      lease = .live(renewedAt: sentAt)
    }
    return lapsed
  }

  /// The node joined the cluster, its first heartbeat sent at `sentAt`, before it holds any
  /// session: the lease counts from there, not from when the holder was made (a node may take
  /// seconds to open its database and restore its calls; counted from before, its lease lapsed
  /// as it joined, and a session opened before its next heartbeat was closed).
  package mutating func joined(sentAt: Instant) {
    lease = .live(renewedAt: sentAt)
  }

  /// The shell's periodic call (each heartbeat): the lease is checked even when nothing happens,
  /// and a batch that failed is sent again.
  package mutating func tick(now: Instant) -> [Effect] {
    var effects = checkLease(now)
    // Room kept for a request whose event never came (answered off the store's path, or its
    // session lost here before it was handled) is let go after a while.
    if !rooms.isEmpty {
      let hold = limits.admissionHold
      forgetRooms { _, room in now - room.at >= hold }
    }
    if store == .failed { store = .idle }
    effects += cutIfIdle(now)
    return effects
  }

  // MARK: Inside

  private mutating func checkLease(_ now: Instant) -> [Effect] {
    guard case .live(let renewedAt) = lease, now - renewedAt >= limits.lease - limits.margin else { return [] }
    lease = .stale
    lapses += 1
    renumbered = []
    let closing = sessions.keys.sorted().map { Effect.close(session: $0, .stale) }
    // Their letters not stored wait in the inbox for the resumes (own frames' senders were not
    // answered, or their batch in flight lands).
    for (_, held) in sessions.sorted(by: { $0.key < $1.key }) { _ = lose(held, sendingOn: false) }
    sessions = [:]
    queue = []
    // Their sessions closed: each client resumes and sends its unanswered candidates again.
    answers = []
    (queuedFrames, urgentEvents, wakeAsked) = (0, 0, nil)
    nodeBytes = 0
    (rooms, reservedBytes) = ([:], 0)
    // A batch in flight may still land (its epochs fence it); its answer is ignored.
    store = .idle
    awaiting = []
    let report = awaited > storedThrough
    storedThrough = eventsNumbered
    return report ? closing + [.eventsDropped(through: eventsNumbered)] : closing
  }

  /// Reports the events stored through a new number: those before the first still queued or in
  /// flight (all of them when none is).
  private mutating func advance() -> [Effect] {
    let pending: UInt64?
    if case .inFlight(_, let events) = store, let first = events.first {
      pending = first.number
    } else {
      pending = queue.first?.number
    }
    var through = pending.map { $0 - 1 } ?? eventsNumbered
    renumbered.removeAll { through >= $0.until }
    for held in renumbered { through = min(through, held.through) }
    guard through > storedThrough else { return [] }
    let report = awaited > storedThrough
    storedThrough = through
    return (report ? [.eventsStored(through: through)] : []) + answersDue()
  }

  /// The seqs of `session` under `epoch` that the batch in flight carries.
  private func inFlightSeqs(_ session: String, epoch: UInt64) -> Set<UInt64> {
    guard case .inFlight(_, let events) = store else { return [] }
    var seqs: Set<UInt64> = []
    for event in events {
      for frame in event.frames where frame.session == session && frame.epoch == epoch { seqs.insert(frame.seq) }
    }
    return seqs
  }

  /// Batch `answered` was answered: the frames waiting for it (`awaiting`) are numbered again, in
  /// their old order, where the session is held at the epoch they wait for, or go where it is now.
  private mutating func settle(_ answered: UInt64, landed: (String) -> Bool, now: Instant) -> [Effect] {
    let due = awaiting.filter { $0.batch == answered }
    guard !due.isEmpty else { return [] }
    awaiting.removeAll { $0.batch == answered }
    var effects: [Effect] = []
    for entry in due {
      let frames = landed(entry.session) ? entry.frames.filter { !entry.flying.contains($0.seq) } : entry.frames
      guard !frames.isEmpty else { continue }
      if sessions[entry.session]?.epoch == entry.epoch {
        effects += renumber(frames.map(\.outgoing.storedFirst), now: now)
      } else {
        effects += frames.map { .unheld($0.outgoing) }
      }
    }
    return effects
  }

  /// A session lost here: its own unstored frames, sent on where the session is now when
  /// `sendingOn` (their senders may have been answered), and its letters retained.
  private mutating func lose(_ held: Held, sendingOn: Bool) -> [Effect] {
    var effects: [Effect] = []
    for frame in held.unstored {
      if frame.outgoing.letter != nil {
        retain(frame.outgoing)
      } else if sendingOn {
        effects.append(.unheld(frame.outgoing))
      }
    }
    return effects
  }

  private mutating func retain(_ outgoing: Outgoing) {
    guard let position = outgoing.letter.flatMap(InboxPosition.init) else { return }
    let entry = Retained(position: position, outgoing: outgoing)
    // Nearly always the newest: letters are read in order.
    let at = retained.lastIndex { $0.position <= position }.map { $0 + 1 } ?? 0
    guard at == 0 || retained[at - 1].position != position else { return }
    retained.insert(entry, at: at)
    retainedBytes += Self.cost(outgoing)
    while retainedBytes > limits.maxNodeBytes, retained.count > 1 {
      retainedBytes -= Self.cost(retained.removeFirst().outgoing)
      retainedDropped += 1
    }
  }

  private mutating func forgetRetained(where drop: (Retained) -> Bool) {
    var kept: [Retained] = []
    for entry in retained {
      if drop(entry) { retainedBytes -= Self.cost(entry.outgoing) } else { kept.append(entry) }
    }
    retained = kept
  }

  private mutating func forgetRooms(where drop: (Admitted, Room) -> Bool) {
    for (key, room) in rooms where drop(key, room) {
      rooms[key] = nil
      reservedBytes -= room.bytes
    }
  }

  private static func cost(_ outgoing: Outgoing) -> Int { outgoing.frame.head.count + outgoing.frame.tail.count }

  /// `nodeBound`: whether the event must fit in the node's bound beside the room kept for
  /// admitted requests (not when it is an admitted request's own).
  private mutating func fits(_ event: [Outgoing], sessionBounds: Bool, nodeBound: Bool, answerBytes: Int = 0) -> Bool {
    // As `Numbered.cost` will count a frame; the seq's digits are those of the session's next
    // seq, near enough for a bound.
    func size(_ outgoing: Outgoing, _ next: UInt64?) -> Int {
      2 * (outgoing.frame.head.count + outgoing.frame.tail.count) + Self.digits(next ?? 1)
    }
    guard event.count <= Self.scannedEvent else {
      return fitsLarge(event, sessionBounds: sessionBounds, nodeBound: nodeBound, extra: answerBytes, size: size)
    }
    // An event is a frame or two nearly always: its sessions are told apart by scanning it, not
    // by dictionaries built for each event.
    var total = answerBytes
    for (offset, outgoing) in event.enumerated() {
      // Each session once, at its first frame, with all of its frames in the event.
      if event[..<offset].contains(where: { $0.session == outgoing.session }) { continue }
      let held = sessions.index(forKey: outgoing.session).map { counts(at: $0) }
      var frames = 0
      var bytes = 0
      for other in event[offset...] where other.session == outgoing.session {
        frames += 1
        bytes += size(other, held?.next)
      }
      total += bytes
      guard sessionBounds, let held else { continue }
      if held.frames + frames > limits.maxSessionFrames { return false }
      if held.bytes + bytes > limits.maxSessionBytes { return false }
    }
    return !nodeBound || nodeBytes + reservedBytes + total <= limits.maxNodeBytes
  }

  /// A session's next seq and unstored frames and bytes, read in place. `sessions[id]`, and
  /// `sessions.values[index]` read through its getter, copy the whole `Held` (its queue and
  /// once-keys retained, then released: measured); an `inout` access (`_modify`) does not.
  private mutating func counts(at index: [String: Held].Index) -> (next: UInt64, frames: Int, bytes: Int) {
    Self.counts(&sessions.values[index])
  }

  private static func counts(_ held: inout Held) -> (next: UInt64, frames: Int, bytes: Int) {
    (held.next, held.unstored.count, held.unstoredBytes)
  }

  /// Events up to this many frames are checked by scanning them (`fits`).
  private static let scannedEvent = 8

  /// `fits` for a larger event (a group's): its sessions counted in dictionaries.
  private mutating func fitsLarge(
    _ event: [Outgoing], sessionBounds: Bool, nodeBound: Bool, extra: Int, size: (Outgoing, UInt64?) -> Int
  ) -> Bool {
    var frames: [String: Int] = [:]
    var bytes: [String: Int] = [:]
    var total = extra
    for outgoing in event {
      let size = size(outgoing, sessions.index(forKey: outgoing.session).map { counts(at: $0).next })
      frames[outgoing.session, default: 0] += 1
      bytes[outgoing.session, default: 0] += size
      total += size
    }
    guard !nodeBound || nodeBytes + reservedBytes + total <= limits.maxNodeBytes else { return false }
    guard sessionBounds else { return true }
    for (session, count) in frames {
      guard let held = sessions.index(forKey: session).map({ counts(at: $0) }) else { continue }
      if held.frames + count > limits.maxSessionFrames { return false }
      if held.bytes + (bytes[session] ?? 0) > limits.maxSessionBytes { return false }
    }
    return true
  }

  private static func digits(_ value: UInt64) -> Int {
    var count = 1
    var rest = value / 10
    while rest > 0 {
      count += 1
      rest /= 10
    }
    return count
  }

  /// Frames of this node's own numbered again (a session held here again: `hold`, `settle`), as
  /// a new event: what awaited their first events waits for this one too.
  private mutating func renumber(_ frames: [Outgoing], now: Instant) -> [Effect] {
    let before = eventsNumbered
    let effects = number(frames, now: now, checkingOnces: false)
    if eventsNumbered > before { renumbered.append((storedThrough, eventsNumbered)) }
    return effects
  }

  /// `checkingOnces`: a frame whose once-key its session had is dropped (a repeat). Not for frames
  /// numbered again (`hold`): their keys are this node's own.
  private mutating func number(
    _ event: [Outgoing], now: Instant, checkingOnces: Bool
  ) -> [Effect] {
    var effects: [Effect] = []
    var queued = QueuedEvent(
      frames: [], queuedAt: now, urgent: event.contains { !$0.mayWait })
    for outgoing in event {
      guard let index = sessions.index(forKey: outgoing.session) else {
        if outgoing.letter != nil { retain(outgoing) } else { effects.append(.unheld(outgoing)) }
        continue
      }
      // Changed where it is stored (`values[index]`): a copy taken out and put back would copy
      // the session's whole queue of unstored frames for each one appended.
      let numbered = Self.number(outgoing, in: &sessions.values[index], checkingOnces: checkingOnces, limits)
      guard let (frame, epoch, written) = numbered else { continue }
      nodeBytes += frame.cost
      if written { effects.append(.write(session: outgoing.session, seq: frame.seq, bytes: frame.bytes)) }
      queued.frames.append(FrameRef(session: outgoing.session, epoch: epoch, seq: frame.seq))
    }
    if !queued.frames.isEmpty {
      eventsNumbered += 1
      queued.number = eventsNumbered
      queue.append(queued)
      count([queued], +1)
    }
    return effects
  }

  /// Numbers `outgoing` for `held`: the frame, the session's epoch, and whether it is written at
  /// once; nil when it is not numbered (a letter the resume applied, or a repeat).
  private static func number(
    _ outgoing: Outgoing, in held: inout Held, checkingOnces: Bool, _ limits: Limits
  ) -> (Numbered, UInt64, Bool)? {
    // A letter the resume that made this holding applied already.
    if let cut = held.lettersAfter, let at = outgoing.letter.flatMap(InboxPosition.init), at <= cut { return nil }
    if checkingOnces, let once = outgoing.once, !held.onces.insert(once) { return nil }
    let seq = held.next
    held.next += 1
    let frame = Numbered(seq: seq, bytes: outgoing.frame.bytes(seq: seq), outgoing: outgoing)
    held.unstored.append(frame)
    held.unstoredBytes += frame.cost
    // Written at once only if every frame before it is written: seqs reach the socket in order.
    var written = false
    if frame.kind == .candidate, held.announced, held.written == seq - 1, mayWriteUnstored(seq, held, limits) {
      held.written = seq
      written = true
    }
    return (frame, held.epoch, written)
  }

  /// Redis has the session's frames through `seq`: held frames up to the next store-first one
  /// still waiting are written.
  private mutating func confirm(_ session: String, through seq: UInt64) -> [Effect] {
    guard let index = sessions.index(forKey: session) else { return [] }
    var effects: [Effect] = []
    // In place (`values[index]`), as in `number`: a copy would copy the frames left.
    let freed = Self.confirm(&sessions.values[index], session, through: seq, limits, &effects)
    nodeBytes -= freed
    return effects
  }

  /// `confirm` on the session itself; the bytes it freed.
  private static func confirm(
    _ held: inout Held, _ session: String, through seq: UInt64, _ limits: Limits, _ effects: inout [Effect]
  ) -> Int {
    guard seq > held.stored else { return 0 }
    let count = held.unstored.prefix { $0.seq <= seq }.count
    var freed = 0
    for frame in held.unstored[..<count] {
      freed += frame.cost
      if frame.seq == held.written + 1 {
        held.written = frame.seq
        effects.append(.write(session: session, seq: frame.seq, bytes: frame.bytes))
      }
    }
    held.unstoredBytes -= freed
    held.unstored.removeFirst(count)
    held.stored = seq
    writeWaitingCandidates(&held, session, limits, &effects)
    return freed
  }

  /// Candidates next in seq order, unstored, are written (within the bound of
  /// `mayWriteUnstored`; candidates written before they were stored lead the rest).
  private static func writeWaitingCandidates(
    _ held: inout Held, _ session: String, _ limits: Limits, _ effects: inout [Effect]
  ) {
    guard held.announced else { return }
    for frame in held.unstored where frame.seq > held.written {
      guard frame.kind == .candidate, frame.seq == held.written + 1, mayWriteUnstored(frame.seq, held, limits)
      else { break }
      held.written = frame.seq
      effects.append(.write(session: session, seq: frame.seq, bytes: frame.bytes))
    }
  }

  /// A candidate is written before it is stored only within `maxSessionFrames` of the last seq
  /// stored: whoever else numbers the session after this node (a resume, or a store-first append
  /// when its inbox is full) goes on past that bound, so a seq this node wrote never means
  /// another frame there (`SessionLedger`'s append step and resume, `allowingAhead`). Letters are
  /// numbered whatever the bounds, so the queue itself may pass it.
  private static func mayWriteUnstored(_ seq: UInt64, _ held: Held, _ limits: Limits) -> Bool {
    seq <= held.stored + UInt64(limits.maxSessionFrames)
  }

  private mutating func count(_ events: some Sequence<QueuedEvent>, _ sign: Int) {
    for event in events {
      queuedFrames += sign * event.frames.count
      if event.urgent { urgentEvents += sign }
    }
  }

  /// Sends the next batch when none is in flight and the queue is due: whole events from the
  /// front of the queue.
  private mutating func cutIfIdle(_ now: Instant) -> [Effect] {
    guard store == .idle, let oldest = queue.first?.queuedAt else { return [] }
    let windowEnds = oldest + limits.batchWindow
    // A frame that may not wait goes at once: a gather of a few ms for others to share its batch
    // was measured and saved nothing (docs/benchmarks.md, "Item 4, fifth step").
    let cause: WriteBehindBatch.Cut
    if queuedFrames >= limits.maxBatchFrames {
      cause = .full
    } else if now >= windowEnds {
      cause = .window
    } else if urgentEvents > 0 {
      cause = .urgent
    } else {
      guard wakeAsked != windowEnds else { return [] }
      wakeAsked = windowEnds
      return [.wake(at: windowEnds)]
    }
    var taken: [QueuedEvent] = []
    var parts: [WriteBehindBatch.Session] = []
    var index: [String: Int] = [:]
    index.reserveCapacity(min(queuedFrames, limits.maxBatchFrames))
    var frames = 0
    var bytes = 0
    var cut = 0
    var live: [FrameRef] = []
    var found: [Numbered?] = []
    for event in queue {
      // Each frame looked up once: whether it is current, and what it is.
      live.removeAll(keepingCapacity: true)
      found.removeAll(keepingCapacity: true)
      var size = 0
      for ref in event.frames {
        // Read in place (`counts`): `sessions[id]` copied the whole session per frame.
        guard let at = sessions.index(forKey: ref.session),
          case .some(let numbered) = Self.unstored(ref, in: &sessions.values[at])
        else { continue }
        live.append(ref)
        found.append(numbered)
        size += numbered?.bytes.count ?? 0
      }
      if !taken.isEmpty, frames + live.count > limits.maxBatchFrames || bytes + size > limits.maxBatchBytes { break }
      cut += 1
      frames += live.count
      bytes += size
      taken.append(
        QueuedEvent(number: event.number, frames: live, queuedAt: event.queuedAt, urgent: event.urgent))
      for (ref, numbered) in zip(live, found) {
        guard let numbered else { continue }
        let part = WriteBehindBatch.Frame(
          seq: ref.seq, bytes: numbered.bytes, requestID: numbered.requestID, once: numbered.outgoing.once)
        let at: Int
        if let known = index[ref.session] {
          at = known
          parts[at].frames.append(part)
        } else {
          at = parts.count
          index[ref.session] = at
          parts.append(WriteBehindBatch.Session(id: ref.session, epoch: ref.epoch, frames: [part]))
        }
        if let letter = numbered.outgoing.letter { parts[at].letterPosition = letter }
      }
    }
    count(queue.prefix(cut), -1)
    queue.removeFirst(cut)
    wakeAsked = nil
    // Events cut with no frame left to store (their sessions lost here) are done with.
    guard frames > 0 else { return advance() }
    batchNumber += 1
    store = .inFlight(number: batchNumber, events: taken)
    return [.store(WriteBehindBatch(number: batchNumber, sessions: parts, cut: cause))]
  }

  /// Whether the frame is still this node's to store: its session held under the same epoch,
  /// and not yet confirmed (read in place: `counts`).
  private mutating func isCurrent(_ ref: FrameRef) -> Bool {
    guard let index = sessions.index(forKey: ref.session) else { return false }
    return Self.unstored(ref, in: &sessions.values[index]) != nil
  }

  /// Nil when the frame is not the session's to store (another epoch, or confirmed); else the
  /// frame numbered, if the session still has it.
  private static func unstored(_ ref: FrameRef, in held: inout Held) -> Numbered?? {
    guard held.epoch == ref.epoch, ref.seq > held.stored else { return nil }
    let offset = Int(ref.seq - held.stored - 1)
    return .some(offset < held.unstored.count ? held.unstored[offset] : nil)
  }
}
