import DialtoneRedis
import DialtoneTestSupport
import Testing

extension RedisTests {
  @Suite struct Connection {
    private func connect() throws -> RedisConnection { try SharedRedis.server().connect() }

    @Test func bytesRoundTripUnchanged() throws {
      let redis = try connect()
      let key = SharedRedis.key("bytes")
      let values: [[UInt8]] = [
        Array(0...255), [], Array("héllo 😀 日本語 \u{7F}".utf8), [0], [13, 10], Array(repeating: 0xFF, count: 70_000),
      ]
      for value in values {
        #expect(try redis.set(key, .bytes(value)))
        #expect(try redis.get(key) == value)
        #expect(try redis.command(["GET", key]) == .bulk(value))
      }
      // Keys are binary too.
      let binaryKey = RedisArgument.bytes(Array(0...255) + key.bytes)
      try redis.set(binaryKey, "v")
      #expect(try redis.get(binaryKey) == Array("v".utf8))
    }

    @Test func protocolTextInAnArgumentStaysAValue() throws {
      let redis = try connect()
      let key = SharedRedis.key("crlf")
      let injected = SharedRedis.key("injected")
      let hostile =
        "x\r\n*3\r\n$3\r\nSET\r\n$\(injected.bytes.count)\r\n" + String(decoding: injected.bytes, as: UTF8.self)
        + "\r\n$1\r\n1\r\n"
      try redis.set(key, .string(hostile))
      #expect(try redis.get(key) == Array(hostile.utf8))
      #expect(try redis.command(["EXISTS", injected]) == .integer(0))
      // Also as a key and as a command name: one argument each, never several commands.
      try redis.set(.string(hostile), "k")
      #expect(try redis.get(.string(hostile)) == Array("k".utf8))
      #expect(throws: RedisError.self) { try redis.command([.string("PING\r\nFLUSHALL")]) }
      #expect(try redis.get(key) == Array(hostile.utf8))
      try redis.del([key, .string(hostile)])
    }

    @Test func errorRepliesCarryTheirCode() throws {
      let redis = try connect()
      let list = SharedRedis.key("list")
      try redis.command(["RPUSH", list, "a"])
      do throws(RedisError) {
        _ = try redis.get(list)
        Issue.record("no error")
      } catch {
        #expect(error.serverPrefix == "WRONGTYPE", "\(error)")
        guard case .server(_, let message) = error else { return }
        #expect(message.hasPrefix("Operation against a key holding the wrong kind of value"), "\(message)")
        #expect(!error.isConnectionLost)
      }
      let unknown = #expect(throws: RedisError.self) { try redis.command(["NOSUCHCOMMAND"]) }
      #expect(unknown?.serverPrefix == "ERR")
      let notInteger = #expect(throws: RedisError.self) {
        try redis.set(list, "text")
        try redis.incr(list)
      }
      #expect(notInteger?.serverPrefix == "ERR")
      // An error reply leaves the connection usable.
      #expect(try redis.command(["PING"]) == .status("PONG"))
      #expect(redis.isOpen)
    }

    @Test func repliesOfEveryShape() throws {
      let redis = try connect()
      let list = SharedRedis.key("shapes")
      #expect(try redis.command(["PING"]) == .status("PONG"))
      #expect(try redis.command(["RPUSH", list, "a", .bytes([]), "c"]) == .integer(3))
      #expect(try redis.command(["LRANGE", list, 0, -1]) == .array([.bulk([97]), .bulk([]), .bulk([99])]))
      #expect(try redis.command(["LRANGE", SharedRedis.key("none"), 0, -1]) == .array([]))
      #expect(try redis.command(["GET", SharedRedis.key("none")]) == .null)
      let nested = try redis.command(["EVAL", "return {1, {'x', {}}, 'y'}", 0])
      #expect(nested == .array([.integer(1), .array([.bulk([120]), .array([])]), .bulk([121])]))
      let scripted = #expect(throws: RedisError.self) {
        try redis.command(["EVAL", "return redis.error_reply('MYCODE went wrong')", 0])
      }
      #expect(scripted == .server(prefix: "MYCODE", message: "went wrong"))
    }

    @Test func aPipelineAnswersInOrderInOneRoundTrip() throws {
      let redis = try connect()
      let counter = SharedRedis.key("counter")
      let list = SharedRedis.key("pipelist")
      try redis.command(["RPUSH", list, "x"])
      var commands: [[RedisArgument]] = (0..<100).map { _ in ["INCR", counter] }
      commands.insert(["INCR", list], at: 50)
      commands.append(["GET", counter])
      let replies = try redis.pipeline(commands)
      #expect(replies.count == 102)
      #expect(Array(replies[0..<50]) == (1...50).map { RedisReply.integer($0) })
      guard case .error(let prefix, _) = replies[50] else {
        Issue.record("\(replies[50])")
        return
      }
      #expect(prefix == "WRONGTYPE")
      #expect(Array(replies[51..<101]) == (51...100).map { RedisReply.integer($0) })
      #expect(replies[101] == .bulk(Array("100".utf8)))
      #expect(try redis.pipeline([]) == [])
      #expect(try redis.command(["PING"]) == .status("PONG"))
    }

    @Test func theURLsDatabaseIsSelected() throws {
      let server = try SharedRedis.server()
      let key = SharedRedis.key("db")
      let one = try RedisConnection(url: server.url + "/1")
      let zero = try RedisConnection(url: server.url)
      try one.set(key, "in one")
      #expect(try one.get(key) == Array("in one".utf8))
      #expect(try zero.get(key) == nil)
      let refused = #expect(throws: RedisError.self) { try RedisConnection(url: server.url + "/99999") }
      guard case .connectionFailed = refused else {
        Issue.record("\(String(describing: refused))")
        return
      }
    }

    @Test func emptyCommandsAndClosedConnectionsAreRefused() throws {
      let redis = try connect()
      #expect(throws: RedisError.invalidRequest("a command needs at least its name")) { try redis.command([]) }
      #expect(throws: RedisError.invalidRequest("a command needs at least its name")) { try redis.pipeline([[]]) }
      redis.close()
      #expect(!redis.isOpen)
      #expect(throws: RedisError.connectionLost(message: "the connection is closed")) { try redis.command(["PING"]) }
    }

    @Test func aRefusedConnectionFails() throws {
      let port = try LoopbackListener.freePort()
      let error = #expect(throws: RedisError.self) { try RedisConnection(url: "redis://127.0.0.1:\(port)") }
      guard case .connectionFailed(let message) = error else {
        Issue.record("\(String(describing: error))")
        return
      }
      #expect(message.lowercased().contains("refused"), "\(message)")
    }

    /// A server that accepts and then never answers: the command timeout ends the wait, and the
    /// connection is closed so that a late reply cannot answer the next command.
    @Test func aSilentServerTimesOut() throws {
      let silent = try LoopbackListener()
      // By default the server's replicas are counted as the connection opens (`INFO
      // replication`, for WAIT): a silent server fails the opening, as nothing was sent yet.
      let opening = #expect(throws: RedisError.self) {
        try RedisConnection(url: "redis://127.0.0.1:\(silent.port)", commandTimeout: .milliseconds(300))
      }
      guard case .connectionFailed(let message) = opening else {
        Issue.record("\(String(describing: opening))")
        return
      }
      #expect(message.contains("timeout"), "\(message)")
      // Without WAIT nothing is asked as it opens: the first command's wait times out.
      let redis = try RedisConnection(
        url: "redis://127.0.0.1:\(silent.port)?wait-replicas=0", commandTimeout: .milliseconds(300))
      let error = #expect(throws: RedisError.self) { try redis.command(["PING"]) }
      guard case .timeout = error else {
        Issue.record("\(String(describing: error))")
        return
      }
      #expect(error?.isConnectionLost == true)
      #expect(!redis.isOpen)
      #expect(throws: RedisError.connectionLost(message: "the connection is closed")) { try redis.command(["PING"]) }
    }
  }
}
