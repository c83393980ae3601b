/// The commands the cluster engines use, with their replies checked and typed: the same on one
/// server and on a Redis Cluster.
extension RedisClient {
  /// SET, with PX when `expiresIn` is given and NX when `onlyIfAbsent`: whether the value was set
  /// (false only when NX found the key present).
  @discardableResult
  public func set(
    _ key: RedisArgument, _ value: RedisArgument, expiresIn: Duration? = nil, onlyIfAbsent: Bool = false
  ) throws(RedisError) -> Bool {
    var arguments: [RedisArgument] = ["SET", key, value]
    if let expiresIn { arguments += ["PX", try .milliseconds(expiresIn)] }
    if onlyIfAbsent { arguments.append("NX") }
    switch try command(arguments) {
    case .status("OK"): return true
    case .null: return false
    case let other: throw .unexpectedReply(other)
    }
  }

  /// The value, or nil when the key does not exist.
  public func get(_ key: RedisArgument) throws(RedisError) -> [UInt8]? {
    switch try command(["GET", key]) {
    case .bulk(let bytes): return bytes
    case .null: return nil
    case let other: throw .unexpectedReply(other)
    }
  }

  /// How many of the keys existed (and are now deleted).
  @discardableResult
  public func del(_ keys: [RedisArgument]) throws(RedisError) -> Int64 {
    try integer(["DEL"] + keys)
  }

  /// Whether the key existed and now expires after `duration`.
  @discardableResult
  public func pexpire(_ key: RedisArgument, _ duration: Duration) throws(RedisError) -> Bool {
    try integer(["PEXPIRE", key, try .milliseconds(duration)]) == 1
  }

  /// The value after incrementing (a missing key counts as 0).
  @discardableResult
  public func incr(_ key: RedisArgument) throws(RedisError) -> Int64 {
    try integer(["INCR", key])
  }

  /// Runs the script by its SHA-1 (EVALSHA); when the server does not know it (NOSCRIPT: a new or
  /// restarted server, SCRIPT FLUSH) sends its source with EVAL, which also caches it there.
  @discardableResult
  public func eval(_ script: RedisScript, keys: [RedisArgument] = [], arguments: [RedisArgument] = [])
    throws(RedisError) -> RedisReply
  {
    do {
      return try command(RedisConnection.scriptCall("EVALSHA", .string(script.sha1), keys: keys, arguments: arguments))
    } catch .server(prefix: "NOSCRIPT", _) {
      return try command(RedisConnection.scriptCall("EVAL", .string(script.source), keys: keys, arguments: arguments))
    }
  }

  private func integer(_ arguments: [RedisArgument]) throws(RedisError) -> Int64 {
    let reply = try command(arguments)
    guard case .integer(let value) = reply else { throw .unexpectedReply(reply) }
    return value
  }
}

extension RedisConnection {
  /// Has the server cache the scripts (SCRIPT LOAD), for `evalsha` on this connection.
  public func load(_ scripts: [RedisScript]) throws(RedisError) {
    for reply in try pipeline(scripts.map { ["SCRIPT", "LOAD", .string($0.source)] }) {
      if case .error(let prefix, let message) = reply { throw .server(prefix: prefix, message: message) }
    }
  }

  /// Runs the commands as one transaction (MULTI … EXEC) in one round trip: the server runs them
  /// all, in order, with no other client's command in between, or none of them when EXEC never
  /// reaches it (this side died mid-write). Each command's reply, errors included.
  public func transaction(_ commands: [[RedisArgument]]) throws(RedisError) -> [RedisReply] {
    guard !commands.isEmpty else { return [] }
    // One command runs whole on its own (a script is atomic): no MULTI and EXEC around it.
    if commands.count == 1 { return try pipeline(commands) }
    let replies = try pipeline([["MULTI"]] + commands + [["EXEC"]])
    guard let exec = replies.last else { throw .unexpectedReply(.null) }
    if case .error(let prefix, let message) = exec { throw .server(prefix: prefix, message: message) }
    guard let results = exec.elements, results.count == commands.count else { throw .unexpectedReply(exec) }
    return results
  }

  /// The EVALSHA of a script, for a pipeline or a transaction: the server must know the script
  /// already (`load`), as a NOSCRIPT there cannot fall back to EVAL.
  public static func evalsha(_ script: RedisScript, keys: [RedisArgument], arguments: [RedisArgument])
    -> [RedisArgument]
  {
    scriptCall("EVALSHA", .string(script.sha1), keys: keys, arguments: arguments)
  }

  /// `verb`, the script, the key count, the keys, the arguments: built into one array reserved at
  /// its size (a batch of the write-behind store has hundreds of arguments, which concatenating
  /// copied twice, with a retain and release of each, per batch).
  static func scriptCall(
    _ verb: RedisArgument, _ script: RedisArgument, keys: [RedisArgument], arguments: [RedisArgument]
  ) -> [RedisArgument] {
    var call: [RedisArgument] = []
    call.reserveCapacity(3 + keys.count + arguments.count)
    call.append(verb)
    call.append(script)
    call.append(.integer(Int64(keys.count)))
    call.append(contentsOf: keys)
    call.append(contentsOf: arguments)
    return call
  }

  /// Whole milliseconds, rounded up so that a positive duration never becomes 0 (which SET refuses).
  static func milliseconds(_ duration: Duration) throws(RedisError) -> Int64 {
    let components = duration.components
    let (whole, overflow) = components.seconds.multipliedReportingOverflow(by: 1000)
    guard !overflow else { throw .invalidRequest("duration \(duration) is too long") }
    let atto = components.attoseconds
    let fraction = atto / 1_000_000_000_000_000 + (atto % 1_000_000_000_000_000 > 0 ? 1 : 0)
    return whole + fraction
  }
}
