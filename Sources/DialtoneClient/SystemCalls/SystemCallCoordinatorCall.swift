import DialtoneProtocol
import Foundation

extension SystemCallCoordinator {
  /// A call the OS knows about (or is being told about): a 1:1 or a group call (`kind`, each
  /// with its own data), incoming or outgoing (`progress`, each with its own stages). What used
  /// to be a dozen flags is read off these cases.
  public struct Call: Sendable, Equatable {
    public let uuid: UUID
    /// A room's call id may change once the server says which call the room holds.
    public internal(set) var callId: CallID
    public let handle: String
    public let displayName: String?
    public internal(set) var video: Bool
    public internal(set) var progress: Progress
    public internal(set) var kind: Kind
    /// The user wants this device's camera in the call (a video call answered or placed, the
    /// camera not turned off); it captures only while the app is active.
    public internal(set) var cameraOn = false

    init(
      uuid: UUID, callId: CallID, handle: String, displayName: String?, video: Bool, progress: Progress, kind: Kind
    ) {
      self.uuid = uuid
      self.callId = callId
      self.handle = handle
      self.displayName = displayName
      self.video = video
      self.progress = progress
      self.kind = kind
    }

    // MARK: Read off the cases

    public var direction: Direction {
      switch progress {
      case .incoming: .incoming
      case .outgoing: .outgoing
      }
    }

    public var stage: Stage {
      switch progress {
      case .incoming(_, .ringing): .ringing
      case .incoming(_, .answering): .answering
      case .incoming(_, .connected), .outgoing(.connected): .connected
      case .outgoing(.requested), .outgoing(.placing), .outgoing(.connecting): .dialing
      }
    }

    /// The OS has accepted the report (incoming) or the start-call action (outgoing).
    public var shown: Bool {
      switch progress {
      case .incoming(_, .ringing(let shown)): shown
      case .incoming(_, .answering), .incoming(_, .connected): true
      case .outgoing(.requested): false
      case .outgoing(.placing), .outgoing(.connecting), .outgoing(.connected): true
      }
    }

    /// How an incoming call reached this device (nil: outgoing).
    public var arrival: Arrival? {
      if case .incoming(let arrival, _) = progress { return arrival }
      return nil
    }

    /// Announced by a VoIP push (its outcome comes from `.resolved` or an `invite`).
    public var pushed: Bool { arrival?.pushed ?? false }
    /// The `invite` for it arrived over signaling.
    public var inviteReceived: Bool { arrival?.invited ?? false }
    /// Its push-resolution timer is armed (a pushed call without invite or `get-call` answer).
    public var awaitingResolution: Bool { arrival == .pushed }

    /// The pending answer action, settled when the call connects.
    public var answerAction: UUID? {
      if case .incoming(_, .answering(let action)) = progress { return action }
      return nil
    }

    public var isGroup: Bool { group != nil }

    public var group: Group? {
      if case .group(let group) = kind { return group }
      return nil
    }

    /// The other side sends video (a 1:1 call upgraded by the other side).
    public var remoteVideo: Bool {
      if case .oneToOne(let remoteVideo) = kind { return remoteVideo }
      return false
    }

    /// What the OS was last told (`hasVideo`).
    public var hasVideo: Bool { video || remoteVideo }
    /// Muted in the OS UI (a group call's; a 1:1 call's mute lives in its engine).
    public var muted: Bool { group?.muted ?? false }
    /// The app's own SFU media (LiveKit, `GroupMediaControl`) were asked to connect.
    public var externalMedia: Bool { group?.externalMedia ?? false }
    /// A room whose join is in flight: its server call id is not known yet.
    public var awaitingRoom: Bool { group?.awaitingRoom ?? false }
  }

  /// A 1:1 call or a group call, with what each has of its own.
  public enum Kind: Sendable, Equatable {
    /// `remoteVideo`: the other side sends video (an upgrade of theirs): the OS shows a video call.
    case oneToOne(remoteVideo: Bool)
    /// Its ring came as a group push or a `group-invite`, or this device starts it; its media
    /// go through the server's SFU.
    case group(Group)
  }

  /// What a group call has of its own.
  public struct Group: Sendable, Equatable {
    /// How this device starts it (an outgoing group call); nil for a ring.
    public internal(set) var start: GroupStart?
    /// A room's join is in flight: the server's id for its call is not known yet.
    public internal(set) var awaitingRoom = false
    /// Someone other than the creator has joined (it is no longer cancelled on end).
    public internal(set) var othersJoined = false
    /// Muted in the OS UI (LiveKit media connect muted).
    public internal(set) var muted = false
    /// The app's own SFU media (LiveKit, `GroupMediaControl`) were asked to connect.
    public internal(set) var externalMedia = false

    init(start: GroupStart? = nil) { self.start = start }
  }

  /// Where a call is: incoming (how it arrived, and how far it is answered) or outgoing.
  public enum Progress: Sendable, Equatable {
    case incoming(Arrival, Answering)
    case outgoing(Placing)
  }

  /// How an incoming call reached this device.
  public enum Arrival: Sendable, Equatable {
    /// A VoIP push announced it and nothing more is known: its resolution timer runs.
    case pushed
    /// A VoIP push announced it; the server said it still rings (or it connected here) and its
    /// invite has not come.
    case pushResolved
    /// Its invite came (`pushed`: a push announced it too).
    case invited(pushed: Bool)

    var pushed: Bool {
      switch self {
      case .pushed, .pushResolved: true
      case .invited(let pushed): pushed
      }
    }

    var invited: Bool {
      if case .invited = self { return true }
      return false
    }
  }

  /// An incoming call's stages.
  public enum Answering: Sendable, Equatable {
    /// Not answered; `shown`: the OS accepted its report.
    case ringing(shown: Bool)
    /// Answered in the OS UI; `action` is settled once this device's media connect.
    case answering(action: UUID)
    case connected
  }

  /// An outgoing call's stages.
  public enum Placing: Sendable, Equatable {
    /// The start-call transaction is requested; the OS has not performed it yet.
    case requested
    /// The OS performed it (and shows the call): it is being placed.
    case placing
    /// "Started connecting" was reported.
    case connecting
    /// Media connected ("connected" was reported).
    case connected
  }
}

extension SystemCallCoordinator.Call {
  /// A push for a call this device knows: its report may show it.
  mutating func pushedToo(shown accepted: Bool) {
    guard case .incoming(let arrival, let answering) = progress else { return }
    let pushed: SystemCallCoordinator.Arrival = arrival.invited ? .invited(pushed: true) : arrival
    progress = .incoming(pushed, accepted && answering == .ringing(shown: false) ? .ringing(shown: true) : answering)
  }

  mutating func invited() {
    guard case .incoming(let arrival, let answering) = progress else { return }
    progress = .incoming(.invited(pushed: arrival.pushed), answering)
  }

  /// A pushed call's outcome is known here: its timer stops.
  mutating func resolved() {
    guard case .incoming(.pushed, let answering) = progress else { return }
    progress = .incoming(.pushResolved, answering)
  }

  mutating func reportAccepted() {
    guard case .incoming(let arrival, .ringing) = progress else { return }
    progress = .incoming(arrival, .ringing(shown: true))
  }

  mutating func changeGroup(_ change: (inout SystemCallCoordinator.Group) -> Void) {
    guard case .group(var group) = kind else { return }
    change(&group)
    kind = .group(group)
  }
}
