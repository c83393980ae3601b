import DialtoneRedis
import Testing

/// Reading replies: hashes as HGETALL answers them, and server errors as what they throw.
@Suite struct RedisReplyTests {
  @Test func aHashReadsAsFieldValuePairsInOrder() throws {
    let reply = RedisReply.array([.bulk(Array("d1".utf8)), .bulk(Array("n1\ns1".utf8)), .status("d2"), .bulk([])])
    let pairs = try #require(reply.fieldsAndValues)
    #expect(pairs.map(\.field) == ["d1", "d2"])
    #expect(pairs.map(\.value) == ["n1\ns1", ""])
    #expect(RedisReply.array([]).fieldsAndValues?.isEmpty == true)
  }

  @Test func anythingElseIsNoHash() {
    #expect(RedisReply.array([.bulk(Array("lonely".utf8))]).fieldsAndValues == nil)
    #expect(RedisReply.array([.bulk(Array("d1".utf8)), .integer(1)]).fieldsAndValues == nil)
    #expect(RedisReply.null.fieldsAndValues == nil)
    #expect(RedisReply.error(prefix: "NOREPLICAS", message: "x").fieldsAndValues == nil)
  }

  @Test func anErrorReplyIsTheErrorItsCommandThrows() {
    let refusal = RedisReply.error(prefix: "NOREPLICAS", message: "too few replicas")
    #expect(refusal.failure == .server(prefix: "NOREPLICAS", message: "too few replicas"))
    #expect(throws: RedisError.server(prefix: "NOREPLICAS", message: "too few replicas")) { try refusal.checked() }
    #expect(RedisReply.integer(1).failure == nil)
    #expect((try? RedisReply.integer(1).checked()) == .integer(1))
  }
}
