import DialtoneProtocol

extension CallEngineMachine {
  /// Where a call is. Each phase holds exactly the data that is true in it: legs exist only
  /// while the call rings, the ICE recovery only once it is accepted, a negotiation only on a
  /// connection that exists. What used to be a set of flags beside an 8-case state is read off
  /// these cases (`state` is derived from them).
  ///
  ///     idle ─start─▶ starting ─made─▶ dialing (caller) ─accept─▶ talking ─▶ ended
  ///                      │                incoming (callee) ─accept─▶ talking
  ///                      └─accept (callee, before its first connection exists)─▶ talking
  enum Phase: Sendable, Equatable {
    /// `start` not handled yet. A callee keeps the invite's offer and the candidates that came
    /// before it started.
    case idle(offer: SessionDescription?, candidates: [IceCandidate])
    /// The first connection is being made (the public state is still `idle`).
    case starting(Making)
    /// Caller: the invite is being made or is out; callee devices may ring and pre-connect (9b).
    case dialing(Dialing)
    /// Callee: ringing; the invite's offer is applied (or on its way), the user has not answered.
    case incoming(Incoming)
    /// Accepted: connecting, connected or recovering (rule 3).
    case talking(Talking)
    case ended(CallEngine.Ending)
  }

  /// A caller whose invite is made or out.
  struct Dialing: Sendable, Equatable {
    var connection: Connection
    /// A callee device said it is alerting (public state `ringing`, else `calling`).
    var alerting = false
    var legs: PreconnectLegs
  }

  /// A callee that rings.
  struct Incoming: Sendable, Equatable {
    /// Its negotiation is `.none` (the invite had no offer yet), `.applying(then: .waitForUser)`
    /// or `.offerApplied`: nothing else happens before the user answers.
    var connection: Connection
    var legs: PreconnectLegs
  }

  /// An accepted call.
  struct Talking: Sendable, Equatable {
    var link: Link
    var recovery: Recovery
    /// Callee: it asked the caller for a restart to change its video (a connection that cannot
    /// renegotiate in place), and no offer came since: it does not ask again.
    var askedForRestart = false
  }

  /// The call's current peer connection.
  enum Link: Sendable, Equatable {
    case making(Making)
    case made(Connection)

    var generation: Int {
      switch self {
      case .making(let making): making.generation
      case .made(let connection): connection.generation
      }
    }
  }

  /// A connection being made (`replaceConnection` is out).
  struct Making: Sendable, Equatable {
    let generation: Int
    /// Remote candidates that came meanwhile (a callee's early trickle; after a replacement,
    /// those of the new ICE generation).
    var candidates: [IceCandidate] = []
    /// Callee: the offer to apply once the connection exists.
    var offer: PendingOffer?
  }

  /// An offer of the other side kept for a connection, and what follows once it is applied.
  struct PendingOffer: Sendable, Equatable {
    var description: SessionDescription
    var then: AfterRemote
  }

  /// An offer of the other side that arrived while a negotiation was completing: it is next.
  struct QueuedOffer: Sendable, Equatable {
    var description: SessionDescription
    var iceRestart: Bool
  }

  /// A made connection and the negotiation on it.
  struct Connection: Sendable, Equatable {
    enum Origin: Sendable, Equatable {
      /// Made for the call (`replaceConnection`).
      case made
      /// A pre-connected leg the call was accepted on (9b): the server may still refuse that
      /// accept, and then the callee accepts again on the invite's offer.
      case adoptedLeg
    }

    let generation: Int
    let canRestartIce: Bool
    let origin: Origin
    var negotiation: Negotiation
    var candidates: RemoteCandidates
    var queuedOffer: QueuedOffer?
    /// What our latest offer or answer on this connection said about our video.
    var sendsVideo: Bool
    /// What this connection's camera was last told (nil: nothing yet).
    var camera: Bool?
    /// Without trickle: what was gathered for the description being made.
    var gathering = Gathering.running([])
    /// With trickle: candidates gathered while our description was still being made or set (the
    /// agent starts gathering on setLocalDescription). They go out right after the invite,
    /// accept, offer or answer that carries their ufrag: sent before it, the server refuses a
    /// candidate for a call it does not know yet, or from a device that has not accepted yet.
    /// nil: the end of candidates.
    var heldLocalCandidates: [IceCandidate?] = []

    init(
      generation: Int, canRestartIce: Bool, origin: Origin = .made, negotiation: Negotiation = .none,
      candidates: RemoteCandidates, sendsVideo: Bool = false, camera: Bool? = nil
    ) {
      self.generation = generation
      self.canRestartIce = canRestartIce
      self.origin = origin
      self.negotiation = negotiation
      self.candidates = candidates
      self.sendsVideo = sendsVideo
      self.camera = camera
    }
  }

  /// One offer/answer exchange on a connection, step by step. At most one is in flight: an
  /// offer of the other side that comes meanwhile waits in `Connection.queuedOffer`.
  enum Negotiation: Sendable, Equatable {
    /// Nothing negotiated on this connection yet and nothing in flight (a callee whose invite
    /// had no offer waits for the caller's).
    case none
    /// The last exchange completed; nothing in flight.
    case stable
    /// Callee, ringing: the invite's offer is applied; the answer waits for the user.
    case offerApplied
    /// Our offer or answer is being created.
    case creating(Purpose)
    /// Our offer or answer is being set locally.
    case setting(Purpose, SessionDescription)
    /// Without trickle: set, waiting for gathering to end (or for its timer).
    case gathering(Purpose, SessionDescription)
    /// Our invite's (false) or restart's (true) offer is out; its answer is awaited.
    case awaitingAnswer(restart: Bool)
    /// Our renegotiation offer is out without being set locally (9a): until its answer comes
    /// nothing changed in the connection, so in glare the callee drops it without a rollback
    /// (which webrtcbin 1.22 lacks) and answers the caller's offer instead.
    case renegotiating(offer: SessionDescription, sends: Bool)
    /// Its answer came: our offer is being set locally, then the answer is applied.
    case renegotiated(offer: SessionDescription, answer: SessionDescription, sends: Bool)
    /// A remote description is being applied; `video` is the video direction it says (read
    /// when it is applied), `then` what follows.
    case applying(video: MediaDirection?, then: AfterRemote)
  }

  /// What a local description is for.
  enum Purpose: Sendable, Equatable {
    /// Caller: the first offer, sent in the `invite`.
    case invite
    /// Caller: an ICE-restart offer (on the same or a fresh connection).
    case restartOffer
    /// Callee: the answer sent in `accept`.
    case accept
    /// Either side: the answer to a later offer.
    case answer
    /// Either side, once connected: an offer changing what we send (video), sent before it is
    /// set locally (see `Negotiation.renegotiating`).
    case renegotiate(sends: Bool)
  }

  /// What follows once a remote description is applied.
  enum AfterRemote: Sendable, Equatable {
    /// It answered our offer: the exchange is complete.
    case settle
    /// Callee, ringing: the invite's offer; the answer waits for the user.
    case waitForUser
    /// Their offer: answer it (`answer`).
    case answer
    /// Their offer, and the user answered: answer it inside `accept`.
    case accept
  }

  /// Remote candidates of the current connection.
  enum RemoteCandidates: Sendable, Equatable {
    /// No remote description of this ICE generation is set yet: they wait, in arrival order.
    case waiting([IceCandidate])
    /// They go straight in.
    case flowing

    /// The remote description being set is of a new ICE generation (ours or theirs): what
    /// comes from now on waits for it.
    mutating func hold() {
      if case .flowing = self { self = .waiting([]) }
    }
  }

  /// Without trickle: the candidates gathered for the description being made.
  enum Gathering: Sendable, Equatable {
    case running([IceCandidate])
    case done([IceCandidate])

    var candidates: [IceCandidate] {
      switch self {
      case .running(let gathered), .done(let gathered): gathered
      }
    }
  }

  /// How an accepted call's ICE is (rule 3, `IceRecovery`).
  typealias Recovery = IceRecovery
}

extension IceRecovery {
  /// The call's public state while this is its recovery.
  var state: CallEngine.State {
    switch self {
    case .connecting: .connecting
    case .connected: .connected
    case .disconnected: .reconnecting(attempt: 0)
    case .restarting(let attempt, _), .retrying(let attempt, _): .reconnecting(attempt: attempt)
    }
  }
}
