import DialtoneCluster
import DialtoneProtocol
import DialtoneRedis
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer

/// Write-behind nodes whose batches go to their own log (`--write-behind-log-stripes`).
@Suite(.scratchPostgres, .scratchRedis, .serialized) struct WriteBehindLogClusterTests {
  /// The frames a node's log holds for a session, as text, from the stripe's entries (read
  /// without a take, which would fence the node).
  private func logged(_ cluster: TestCluster, node: String, _ session: String, stripes: Int) throws -> [String] {
    let redis = try cluster.connect()
    defer { redis.close() }
    let stripe = WriteBehindLog(redis, stripes: stripes, expiry: .seconds(60)).stripe(of: session)
    let reply = try redis.command(["LRANGE", .string(WriteBehindLog.Keys(node: node, stripe: stripe).log), "0", "-1"])
    var frames: [String] = []
    for bytes in (reply.elements ?? []).compactMap(\.bytes) {
      for frame in try WriteBehindLogEntry(decoding: bytes).frames where frame.session == session {
        frames.append(String(decoding: frame.bytes, as: UTF8.self))
      }
    }
    return frames
  }

  private func sessionLog(_ cluster: TestCluster, _ session: String) throws -> Int64 {
    let redis = try cluster.connect()
    defer { redis.close() }
    return try redis.command(["ZCARD", .string("dt:session:{\(session)}:log")]).integer ?? -1
  }

  @Test func relayedCandidatesAreStoredInTheHoldersLogAndTrimmedOnceAcknowledged() async throws {
    let stripes = 3
    let cluster = try await TestCluster.start(2) {
      $0.writeBehindSessions = true
      $0.writeBehindLogStripes = stripes
    }
    let (alice, bob, call) = try await cluster.answeredCall(alice: 0, bob: 1)
    let (session, lastSeq) = (try #require(bob.sessionId), bob.lastSeq)
    let bobsNode = try #require(cluster.nodes[1].server.cluster?.thisNode)
    let before = try sessionLog(cluster, session)
    for n in 1...3 {
      #expect(try await alice.candidateFor(call, n).isAck)
    }
    try await bob.expectCandidates(1...3, from: lastSeq + 1)
    // His node stored them in its log, not in his session's keys.
    let stored = await eventually(within: 10) {
      let frames = (try? logged(cluster, node: bobsNode, session, stripes: stripes)) ?? []
      return (1...3).allSatisfy { n in frames.contains { $0.contains("candidate:\(n) ") } }
    }
    #expect(stored)
    #expect(try sessionLog(cluster, session) == before)
    // Once he acknowledges them, his node's housekeeping trims them from its log.
    bob.ack()
    let trimmed = await eventually(within: 10) {
      (try? logged(cluster, node: bobsNode, session, stripes: stripes))?.isEmpty == true
    }
    #expect(trimmed)
    await cluster.stop()
  }
}
