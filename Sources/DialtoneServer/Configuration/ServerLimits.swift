/// What one client, user or address may make the server hold or do. Every limit is an option of
/// `dialtone-server` (protocol.md 15, deploy.md); 0 turns a limit off where the help says so.
public struct ServerLimits: Sendable, Equatable {
  /// Bytes queued to one socket that its reader has not taken; over it, the socket is closed
  /// with 4429 and the client resumes.
  public var maxOutgoingBytes = 2 << 20
  /// Bytes of sent-but-unacknowledged messages a session keeps for resume; the oldest go first
  /// (a resume from before them gets `resync`).
  public var maxUnackedBytes = 1 << 20
  /// Messages per second one socket may send (sustained; bursts up to 4 s worth).
  public var messagesPerSecond: Double = 50
  /// Invites (1:1 and group) one user may start per minute (bursts up to 10).
  public var invitesPerMinute: Double = 30
  /// Calls one user may have ringing or connected at once, as the caller.
  public var maxLiveCallsPerUser = 8
  /// Devices (sessions) one user may have connected or resumable at once.
  public var maxDevicesPerUser = 16
  /// Open WebSockets from one IP address (0: no limit). Behind a proxy every socket has the
  /// proxy's address: raise it or turn it off there.
  public var maxConnectionsPerAddress = 256
  /// HTTP requests per second from one IP address, `/healthz` excepted (bursts up to 5 s worth;
  /// 0: no limit).
  public var httpRequestsPerSecond: Double = 20
  /// Push registrations (installations) one user may have.
  public var maxPushRegistrationsPerUser = 16
  /// Users one user may block.
  public var maxBlocksPerUser = 1000

  public init() {}

  var messageRate: TokenBucket.Rate { .init(perSecond: messagesPerSecond, burst: max(1, messagesPerSecond * 4)) }
  var inviteRate: TokenBucket.Rate { .perMinute(invitesPerMinute, burst: min(10, max(1, invitesPerMinute))) }
  var httpRate: TokenBucket.Rate { .init(perSecond: httpRequestsPerSecond, burst: max(1, httpRequestsPerSecond * 5)) }
}
