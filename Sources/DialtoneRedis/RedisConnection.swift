import CRedis
import DialtoneSupport
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// One connection in blocking mode: hiredis's own over TCP, or hiredis's parser over
/// `RedisTLSLink` for `rediss://`. Calls block the calling thread until the server answers,
/// bounded by the configuration's timeouts. After a lost connection, a timeout or a protocol
/// error the connection is closed and every later call fails: open a new one.
///
/// A server with replicas (Sentinel's, a managed service's) may fail over to one that lacks its
/// last writes, so `command`, `pipeline` and `transaction` end their round trip with `WAIT` as
/// `RedisClusterConnection` does for each shard (`RedisReplicaWait`, from the configuration):
/// writes too few replicas confirmed in time, even after another WAIT with the replicas counted
/// again, are refused with `NOREPLICAS` (`command` and `transaction` throw it, `pipeline` answers
/// it for every command). How many replicas there are to wait for is `INFO replication`'s
/// `connected_slaves`, read as the connection opens, every `replicaRefresh`, after a WAIT came
/// back short and after one counted more replicas than that. None (or a server that is itself a
/// replica, or refuses INFO): no WAIT. `send` and `receive` never WAIT (the cluster's own).
public final class RedisConnection: @unchecked Sendable {
  // @unchecked: `link`, `replicas` and `recount` are only read or written under `lock`, which
  // serialises every call on the connection.
  private let lock = Locked()
  private var link: Link?
  /// The server's replicas when last counted (`RedisReplicaWait`); 0: no WAIT.
  private var replicas = 0
  /// When they are counted again.
  private var recount: RedisRereadSchedule

  /// How the bytes travel.
  enum Link {
    case plain(UnsafeMutablePointer<redisContext>)
    case tls(RedisTLSLink)
  }

  public let configuration: RedisConfiguration

  public convenience init(url: String, connectTimeout: Duration = .seconds(5), commandTimeout: Duration = .seconds(5))
    throws(RedisError)
  {
    try self.init(RedisConfiguration(url: url, connectTimeout: connectTimeout, commandTimeout: commandTimeout))
  }

  /// `replicaRefresh`: how often the server's replicas are counted again when nothing pointed at
  /// a change (as `RedisClusterConnection.mapRefresh`), by `clock`.
  public init(
    _ configuration: RedisConfiguration, replicaRefresh: Duration = .seconds(5),
    clock: any DialtoneClock = SystemClock()
  ) throws(RedisError) {
    self.configuration = configuration
    recount = RedisRereadSchedule(every: replicaRefresh, clock: clock)
    // hiredis writes with write(2): a write to a connection the server reset would otherwise kill
    // the process with SIGPIPE instead of failing with EPIPE (the project's other network modules
    // ignore it too).
    signal(SIGPIPE, SIG_IGN)
    guard !configuration.host.utf8.contains(0) else { throw .invalidRequest("the host contains a NUL byte") }
    if let tls = configuration.tls {
      link = .tls(try RedisTLSLink(configuration, tls))
    } else {
      link = .plain(try Self.connectPlain(configuration))
    }
    if let password = configuration.password {
      do {
        let user: [RedisArgument] = configuration.username.map { [.string($0)] } ?? []
        try command(["AUTH"] + user + [.string(password)])
      } catch {
        close()
        // The server's refusal (WRONGPASS, …) says nothing secret; the password is not repeated.
        throw .connectionFailed(message: "AUTH as \(configuration.username ?? "default"): \(error)")
      }
    }
    if configuration.database != 0 {
      do {
        try command(["SELECT", .integer(Int64(configuration.database))])
      } catch {
        close()
        throw .connectionFailed(message: "SELECT \(configuration.database): \(error)")
      }
    }
    if configuration.replicaWait.replicas > 0 {
      do {
        try lock.withLock { () throws(RedisError) in replicas = try countReplicas() ?? 0 }
      } catch {
        close()
        throw .connectionFailed(message: "INFO replication: \(error)")
      }
    }
  }

  deinit { Self.free(link) }

  private static func connectPlain(_ configuration: RedisConfiguration) throws(RedisError)
    -> UnsafeMutablePointer<redisContext>
  {
    guard
      let connected = redisConnectWithTimeout(
        configuration.host, Int32(clamping: configuration.port), Self.timeval(configuration.connectTimeout))
    else { throw .connectionFailed(message: "hiredis could not allocate a context") }
    guard connected.pointee.err == 0 else {
      let message = Self.errorText(connected)
      redisFree(connected)
      throw .connectionFailed(message: message)
    }
    guard redisSetTimeout(connected, Self.timeval(configuration.commandTimeout)) == REDIS_OK else {
      let message = Self.errorText(connected)
      redisFree(connected)
      throw .connectionFailed(message: "cannot set the command timeout: \(message)")
    }
    return connected
  }

  static func free(_ link: Link?) {
    switch link {
    case .plain(let context): redisFree(context)
    case .tls(let tls): tls.close()
    case nil: break
    }
  }

  /// Sends one command and waits for its reply. An error reply is thrown as `.server`.
  @discardableResult
  public func command(_ arguments: [RedisArgument]) throws(RedisError) -> RedisReply {
    guard !arguments.isEmpty else { throw .invalidRequest("a command needs at least its name") }
    let reply = try lock.withLock { () throws(RedisError) in try roundTrip([arguments])[0] }
    if case .error(let prefix, let message) = reply { throw .server(prefix: prefix, message: message) }
    return reply
  }

  /// Sends every command at once, then reads their replies, in order: one round trip. Error
  /// replies stay in the result as `.error` values, so one failing command loses no other reply;
  /// writes too few replicas confirmed are answered `NOREPLICAS` for every command.
  public func pipeline(_ commands: [[RedisArgument]]) throws(RedisError) -> [RedisReply] {
    guard !commands.contains(where: \.isEmpty) else { throw .invalidRequest("a command needs at least its name") }
    return try lock.withLock { () throws(RedisError) -> [RedisReply] in
      do throws(RedisError) {
        return try roundTrip(commands)
      } catch .server(prefix: "NOREPLICAS", let message) {
        return Array(repeating: .error(prefix: "NOREPLICAS", message: message), count: commands.count)
      }
    }
  }

  // MARK: WAIT (called under `lock`)

  /// The commands, and WAIT after them in the same round trip when the server has replicas to
  /// wait for; throws `NOREPLICAS` when too few confirmed (`RedisReplicaWait.confirm`).
  private func roundTrip(_ commands: [[RedisArgument]]) throws(RedisError) -> [RedisReply] {
    let policy = configuration.replicaWait
    if policy.replicas > 0, recount.due() { replicas = try countReplicas() ?? 0 }
    let waitingFor = policy.needed(known: replicas)
    guard waitingFor > 0 else { return try exchange(commands) }
    let received = try exchange(commands + [try policy.command(for: waitingFor)])
    let outcome = policy.confirm(
      received.last, waitingFor: waitingFor,
      recount: { () -> Int? in
        // A server demoted meanwhile (or a connection gone) confirms nothing any more.
        guard let count = try? countReplicas() else { return nil }
        replicas = count
        return policy.needed(known: count)
      },
      wait: { (count: Int) throws(RedisError) -> RedisReply in try exchange([try policy.command(for: count)])[0] })
    switch outcome {
    case .confirmed(let acknowledged):
      // More replicas confirmed than were counted: count them again, so that they are waited for.
      if acknowledged > replicas { recount.stale = true }
      return Array(received.prefix(commands.count))
    case .refused:
      recount.stale = true
      throw .server(
        prefix: "NOREPLICAS",
        message: policy.refusal(of: "\(RedisAddress(host: configuration.host, port: configuration.port))"))
    }
  }

  /// `connected_slaves` from `INFO replication`; nil when the server is a replica itself. A server
  /// that refuses INFO (a command renamed away, an ACL) counts as having none.
  private func countReplicas() throws(RedisError) -> Int? {
    guard case .bulk(let bytes) = try exchange([["INFO", "replication"]])[0] else { return 0 }
    var count = 0
    for line in String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline) {
      let field = line.split(separator: ":", maxSplits: 1)
      guard field.count == 2 else { continue }
      switch field[0] {
      case "role" where field[1] != "master": return nil
      case "connected_slaves": count = Int(field[1]) ?? 0
      default: continue
      }
    }
    return count
  }

  /// One round trip as it is, no WAIT added: every command written, then every reply read.
  private func exchange(_ commands: [[RedisArgument]]) throws(RedisError) -> [RedisReply] {
    switch link {
    case nil:
      throw .connectionLost(message: "the connection is closed")
    case .tls(let tls)?:
      return try failing(tls) { () throws(RedisError) in
        try tls.send(commands)
        var replies: [RedisReply] = []
        replies.reserveCapacity(commands.count)
        for _ in commands { replies.append(try tls.receive()) }
        return replies
      }
    case .plain(let context)?:
      guard Self.append(commands, to: context) == REDIS_OK else { throw fail(context) }
      var replies: [RedisReply] = []
      replies.reserveCapacity(commands.count)
      for _ in commands {
        var raw: UnsafeMutableRawPointer?
        guard redisGetReply(context, &raw) == REDIS_OK else { throw fail(context) }
        replies.append(try take(raw, context))
      }
      return replies
    }
  }

  /// The first half of `pipeline`: writes every command and returns without reading, so that a
  /// caller with several connections (a Redis Cluster's shards) has them all working at once.
  /// Read the replies with `receive(count:)` before anything else on this connection.
  func send(_ commands: [[RedisArgument]]) throws(RedisError) {
    guard !commands.contains(where: \.isEmpty) else { throw .invalidRequest("a command needs at least its name") }
    try withLink { link throws(RedisError) in
      switch link {
      case .tls(let tls):
        try failing(tls) { () throws(RedisError) in try tls.send(commands) }
      case .plain(let context):
        guard Self.append(commands, to: context) == REDIS_OK else { throw fail(context) }
        var done: Int32 = 0
        while done == 0 {
          guard redisBufferWrite(context, &done) == REDIS_OK else { throw fail(context) }
        }
      }
    }
  }

  /// The second half of `pipeline`: the replies to the last `count` commands `send` wrote.
  func receive(count: Int) throws(RedisError) -> [RedisReply] {
    try withLink { link throws(RedisError) in
      var replies: [RedisReply] = []
      replies.reserveCapacity(count)
      switch link {
      case .tls(let tls):
        try failing(tls) { () throws(RedisError) in
          for _ in 0..<count { replies.append(try tls.receive()) }
        }
      case .plain(let context):
        for _ in 0..<count {
          var raw: UnsafeMutableRawPointer?
          guard redisGetReply(context, &raw) == REDIS_OK else { throw fail(context) }
          replies.append(try take(raw, context))
        }
      }
      return replies
    }
  }

  /// Whether the connection is still open as far as this side knows (no round trip).
  public var isOpen: Bool {
    return lock.withLock {
      return link != nil
    }
  }

  /// Hands the link over (to a subscriber, which reads it on its own thread); this connection is
  /// closed from then on.
  func detachLink() -> Link? {
    return lock.withLock {
      let detached = link
      link = nil
      return detached
    }
  }

  /// Closes the connection; later calls fail with `connectionLost`.
  public func close() {
    lock.withLock {
      Self.free(link)
      link = nil
    }
  }

  private func withLink<R>(_ body: (Link) throws(RedisError) -> R) throws(RedisError) -> R {
    return try lock.withLock { () throws(RedisError) in
      guard let link else { throw .connectionLost(message: "the connection is closed") }
      return try body(link)
    }
  }

  /// Runs a TLS exchange; a failure that leaves the link unusable closes it (a late reply would
  /// otherwise answer the next command). Called under `lock`.
  private func failing<R>(_ tls: RedisTLSLink, _ body: () throws(RedisError) -> R) throws(RedisError) -> R {
    do {
      return try body()
    } catch {
      if error.isConnectionLost {
        tls.close()
        link = nil
      }
      throw error
    }
  }

  /// Converts and frees a reply; a NULL one means the context failed. Called under `lock`.
  private func take(_ raw: UnsafeMutableRawPointer?, _ context: UnsafeMutablePointer<redisContext>)
    throws(RedisError) -> RedisReply
  {
    guard let raw else { throw fail(context) }
    defer { freeReplyObject(raw) }
    return Self.convert(raw.assumingMemoryBound(to: redisReply.self))
  }

  /// The error the context recorded; the context is freed, as hiredis cannot use it again (and
  /// after a timeout a late reply would answer the next command). Called under `lock`.
  private func fail(_ failed: UnsafeMutablePointer<redisContext>) -> RedisError {
    // Read first: the free below may change errno.
    let code = errno
    let message = Self.errorText(failed)
    let error: RedisError =
      switch failed.pointee.err {
      case REDIS_ERR_IO where code == EAGAIN || code == EWOULDBLOCK || code == ETIMEDOUT:
        .timeout(message: "no reply within \(configuration.commandTimeout)")
      case REDIS_ERR_PROTOCOL: .protocolError(message: message)
      case REDIS_ERR_EOF: .connectionLost(message: "the server closed the connection")
      default: .connectionLost(message: message)
      }
    redisFree(failed)
    link = nil
    return error
  }

  static func convert(_ reply: UnsafeMutablePointer<redisReply>) -> RedisReply {
    let value = reply.pointee
    func bytes() -> [UInt8] {
      guard let str = value.str, value.len > 0 else { return [] }
      return Array(UnsafeRawBufferPointer(start: str, count: value.len))
    }
    switch value.type {
    case REDIS_REPLY_STATUS: return .status(String(decoding: bytes(), as: UTF8.self))
    case REDIS_REPLY_ERROR: return RedisReply.serverError(String(decoding: bytes(), as: UTF8.self))
    case REDIS_REPLY_INTEGER: return .integer(Int64(value.integer))
    case REDIS_REPLY_STRING: return .bulk(bytes())
    case REDIS_REPLY_ARRAY:
      guard let element = value.element else { return .array([]) }
      return .array((0..<value.elements).compactMap { index in element[index].map(convert) })
    default: return .null
    }
  }

  /// Queues the commands in hiredis's output buffer, formatted by `RedisCommandFormat` in one
  /// buffer (one append for a whole pipeline).
  static func append(_ commands: [[RedisArgument]], to context: UnsafeMutablePointer<redisContext>) -> Int32 {
    guard !commands.isEmpty else { return REDIS_OK }
    return RedisCommandFormat.encode(commands).withUnsafeBufferPointer { bytes in
      bytes.withMemoryRebound(to: CChar.self) { redisAppendFormattedCommand(context, $0.baseAddress, $0.count) }
    }
  }

  static func errorText(_ context: UnsafeMutablePointer<redisContext>) -> String {
    withUnsafeBytes(of: &context.pointee.errstr) { raw in
      String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
    }
  }

  static func timeval(_ duration: Duration) -> Glibc.timeval {
    let components = duration.components
    let microseconds = components.attoseconds / 1_000_000_000_000
    return Glibc.timeval(tv_sec: Int(max(0, components.seconds)), tv_usec: Int(max(0, microseconds)))
  }
}
