import DialtoneCluster
import DialtoneJSON
import DialtoneProtocol
import DialtoneRedis
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer

/// A cluster as managed services run it: Redis over TLS with an ACL user limited to the cluster's
/// keys (the default user off), and PostgreSQL over TLS with its certificate checked
/// (`sslmode=verify-full`). Two nodes set up a call across each other and the history has it.
@Suite struct ClusterOnTLSTests {
  @Test func aCallAcrossTwoNodesOnAnAuthenticatedTLSRedisAndATLSPostgreSQL() async throws {
    try await ScratchRedis.withTLS { redis, certificates in
      let admin = try redis.connect()
      try admin.command(["ACL", "SETUSER", "dialtone", "on", ">node-secret", "~dt:*", "&*", "+@all"])
      try admin.command(["ACL", "SETUSER", "default", "off"])
      admin.close()
      try await ScratchPostgres.with { postgres in
        try await postgres.enableTLS(certificate: certificates.server, key: certificates.serverKey)
        let database = try postgres.freshSchema() + "&sslmode=verify-full&sslrootcert=\(certificates.ca)"
        let redisURL = "rediss://dialtone:node-secret@127.0.0.1:\(redis.port)/0?ca-file=\(certificates.ca)"
        try await stopping(try await Self.nodes(database: database, redis: redisURL), stop: Self.stop) { nodes in
          try await Self.callAcross(nodes, redisURL: redisURL)
        }
      }
    }
  }

  private static func nodes(database: String, redis: String) async throws -> [TestServer] {
    var nodes: [TestServer] = []
    for index in 1...2 {
      nodes.append(
        try await TestServer(configure: {
          $0.databaseURL = database
          $0.redisURL = redis
          $0.nodeName = "tls\(index)"
        }))
    }
    return nodes
  }

  private static func stop(_ nodes: [TestServer]) async {
    for node in nodes { await node.stop() }
  }

  private static func callAcross(_ nodes: [TestServer], redisURL: String) async throws {
    let bob = try await nodes[1].connect("bob")
    let presence = try RedisConnection(url: redisURL)
    defer { presence.close() }
    let seen = await eventually(within: 10) {
      (try? ClusterPresence(presence, nodeExpiry: .seconds(3)).devices(of: "bob"))?.contains { $0.connected } == true
    }
    #expect(seen)
    let alice = try await nodes[0].connect("alice")
    let call = callID("tls")
    #expect(try await alice.invite(call, to: "bob").isAck)
    _ = try await bob.expect(.invite)
    #expect(
      try await bob.act(.accept(.init(callId: call, answer: SessionDescription(sdp: "v=0\r\n")))).isAck)
    _ = try await alice.expect(.accept)
    #expect(try await alice.act(.hangup(.init(callId: call))).isAck)
    #expect(try await bob.expect(.callEnded).endReason == .hangup)
    let recorded = await eventually(within: 10) {
      let history = try? await nodes[1].http("GET", "/v1/calls", token: nodes[1].token("bob"))
      return history?.json?["calls"]?.arrayValue?.map { $0["callId"]?.stringValue } == [call]
    }
    #expect(recorded)
  }
}
