/// What the cluster engines need of Redis, whether it is one server (`RedisConnection`) or a
/// Redis Cluster (`RedisClusterConnection`, which routes each command to the shard that holds
/// its keys). Calls block the calling thread; run them off the cooperative pool.
public protocol RedisClient: AnyObject, Sendable {
  var configuration: RedisConfiguration { get }
  /// Whether every script's keys must share one hash slot (CROSSSLOT otherwise): the callers
  /// then split steps that touch several tags (`SessionLedger`, `CallOwnership`).
  var isCluster: Bool { get }
  /// False once the connection broke or was closed: open another one.
  var isOpen: Bool { get }
  /// Sends one command and waits for its reply. An error reply is thrown as `.server`.
  @discardableResult
  func command(_ arguments: [RedisArgument]) throws(RedisError) -> RedisReply
  /// Every command's reply, in order, error replies included; one round trip per server.
  func pipeline(_ commands: [[RedisArgument]]) throws(RedisError) -> [RedisReply]
  /// MULTI … EXEC: all the commands or none. On a cluster their keys must share one slot.
  func transaction(_ commands: [[RedisArgument]]) throws(RedisError) -> [RedisReply]
  /// Has every server that may run them know the scripts, for EVALSHA in pipelines.
  func load(_ scripts: [RedisScript]) throws(RedisError)
  func close()
}

extension [RedisReply] {
  /// The replies, or the first error reply among them thrown: for callers that read each reply
  /// of a pipeline as a value, where an error (NOREPLICAS: the shard's replicas did not confirm
  /// the round trip; CLUSTERDOWN) must not read as "no such key".
  public func throwingFirstError() throws(RedisError) -> [RedisReply] {
    if let failure = lazy.compactMap(\.failure).first { throw failure }
    return self
  }
}

extension RedisConnection: RedisClient {
  public var isCluster: Bool { false }
}
