/// When a write to a Redis Cluster shard counts as stored: once `replicas` of the shard's
/// replicas confirmed it (`WAIT`). Replication is asynchronous, so a primary that dies can take
/// its last writes with it; a write only the primary had is reported as not stored
/// (`NOREPLICAS`), exactly as if the connection had broken with it in flight, and the caller
/// treats it so (the cluster's sessions resync rather than hand out a seq a promoted replica
/// would hand out again).
///
/// `RedisClusterConnection` ends every round trip to a primary with `WAIT n timeout`, `n` being
/// `replicas` capped at the replicas the slot map lists for that shard and the cluster does not
/// mark failed (a shard whose replicas all failed has none that could take over, and is written
/// without waiting, as a single Redis is). A WAIT that comes back short is tried again, the map
/// read again first (a replica marked failed since stops counting), up to `attempts` WAITs.
public struct RedisReplicaWait: Sendable, Equatable {
  /// How many replicas must confirm a round trip's writes (capped as above); 0: no WAIT at all,
  /// for a cluster without replicas or one that accepts losing a failover's last writes.
  public var replicas: Int
  /// How long one WAIT waits for them.
  public var timeout: Duration
  /// How many WAITs a round trip may take before its writes count as unconfirmed (at least 1).
  public var attempts: Int
  /// Told of each round trip whose writes needed more than one WAIT or went unconfirmed.
  public var observer: RedisReplicaObserver?

  /// One replica, 500 ms, two WAITs: at most about a second before a write is refused.
  public static let standard = RedisReplicaWait(replicas: 1, timeout: .milliseconds(500), attempts: 2)

  public init(replicas: Int, timeout: Duration, attempts: Int, observer: RedisReplicaObserver? = nil) {
    self.replicas = max(0, replicas)
    self.timeout = timeout
    self.attempts = max(1, attempts)
    self.observer = observer
  }

  /// How many replicas to WAIT for on a shard the map lists with `known` replicas not failed.
  public func needed(known: Int) -> Int { min(replicas, max(0, known)) }
}

/// Counts what WAIT found (the cluster's metrics). Compared by identity: two configurations are
/// equal only when they report to the same place.
public final class RedisReplicaObserver: Sendable, Equatable {
  public enum Outcome: Sendable, Equatable {
    /// Confirmed, but only by a WAIT after the first (a replica lagging).
    case confirmedLate
    /// Not confirmed by enough replicas within every WAIT: the writes were refused.
    case unconfirmed
  }

  private let report: @Sendable (Outcome) -> Void

  public init(_ report: @escaping @Sendable (Outcome) -> Void) { self.report = report }

  func callAsFunction(_ outcome: Outcome) { report(outcome) }

  public static func == (a: RedisReplicaObserver, b: RedisReplicaObserver) -> Bool { a === b }
}
