/// What `RedisConnection` (one server) and `RedisClusterConnection` (each shard's primary) do
/// alike with a round trip's closing `WAIT`: this and `RedisRereadSchedule` are the one copy.
extension RedisReplicaWait {
  /// The WAIT that ends a round trip, for `count` replicas.
  func command(for count: Int) throws(RedisError) -> [RedisArgument] {
    ["WAIT", .integer(Int64(count)), try .milliseconds(timeout)]
  }

  enum Confirmation: Equatable {
    /// Enough replicas confirmed (`acknowledged` of them: more than the server was thought to
    /// have means it gained one, and its replicas are to be counted again).
    case confirmed(acknowledged: Int)
    /// Too few within every WAIT: the round trip's writes are refused (`NOREPLICAS`).
    case refused
  }

  /// Whether the writes before a WAIT that answered `reply` reached the `first` replicas they
  /// must. A short answer has `recount` count the server's replicas again (a replica marked
  /// failed or disconnected since stops counting; nil: the server can no longer confirm anything,
  /// as it is no longer the primary or its connection is gone) and `wait` send WAIT again for
  /// that many, up to `attempts` WAITs in all. The observer hears of a late or refused round trip.
  func confirm(
    _ reply: RedisReply?, waitingFor first: Int, recount: () -> Int?,
    wait: (Int) throws(RedisError) -> RedisReply
  ) -> Confirmation {
    var needed = first
    var acknowledged = reply?.integer.map { Int(clamping: $0) } ?? -1
    var attempt = 1
    while acknowledged < needed {
      guard attempt < attempts else { return refuse() }
      attempt += 1
      guard let now = recount() else { return refuse() }
      needed = now
      guard acknowledged < needed else { break }
      do throws(RedisError) {
        acknowledged = try wait(needed).integer.map { Int(clamping: $0) } ?? -1
      } catch {
        return refuse()
      }
    }
    if attempt > 1 { observer?(.confirmedLate) }
    return .confirmed(acknowledged: acknowledged)
  }

  private func refuse() -> Confirmation {
    observer?(.unconfirmed)
    return .refused
  }

  /// Why a round trip too few of `server`'s replicas confirmed in time is refused (`NOREPLICAS`).
  func refusal(of server: String) -> String {
    "too few replicas of \(server) confirmed the writes within \(attempts) WAIT(s) of \(timeout)"
      + " (they ran on the primary, but a failover could lose them)"
  }
}
