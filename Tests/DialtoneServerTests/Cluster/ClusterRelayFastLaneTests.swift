import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer

/// The relay's fast lane on a cluster node (one node, so that every call runs on it): the same
/// generated script as `RelayFastLaneTests`, with the lane and without, in each session mode;
/// every client gets the same frames byte for byte: its numbered frames in the same order, and
/// the same frames without a seq. Where those fall among the numbered ones is not compared: a
/// write-behind node writes a relayed candidate's seq-less ack once the batch holding its copy is
/// stored, from the sender, so a ping's answer stored in the same batch may come before it or
/// after, with either path.
@Suite(.scratchPostgres, .scratchRedis, .serialized) struct ClusterRelayFastLaneTests {
  /// A client's numbered frames in order, then its frames without a seq, sorted.
  private static func comparable(_ frames: [String: [String]]) -> [String: [String]] {
    frames.mapValues { frames in
      let numbered = frames.filter(isNumbered)
      return numbered + frames.filter { !isNumbered($0) }.sorted()
    }
  }

  private static func isNumbered(_ frame: String) -> Bool {
    let object = try? JSONSerialization.jsonObject(with: Data(frame.utf8)) as? [String: Any]
    return object?["seq"] != nil
  }

  /// The script of `seed` on a one-node cluster: each client's frames.
  private func run(seed: UInt64, fastLane: Bool, writeBehind: Bool) async throws -> [String: [String]] {
    let cluster = try await TestCluster.start(1) {
      $0.writeBehindSessions = writeBehind
      $0.relayFastLane = fastLane
      $0.limits.messagesPerSecond = 100_000
    }
    let frames = try await stopping(
      cluster, stop: { await $0.stop() },
      { cluster in
        #expect(cluster.nodes[0].server.hub.takesRelayFastLane == fastLane)
        return try await RelayFastLaneTests.script(seed: seed) { try await cluster.connect($0, device: $1, on: 0) }
      })
    return frames
  }

  @Test(arguments: [1, 2] as [UInt64])
  func aWriteBehindNodesFastLaneWritesWhatTheGeneralPathWrites(seed: UInt64) async throws {
    RelayFastLaneTests.compare(
      fast: Self.comparable(try await run(seed: seed, fastLane: true, writeBehind: true)),
      general: Self.comparable(try await run(seed: seed, fastLane: false, writeBehind: true)))
  }

  @Test func aStoreFirstNodesFastLaneWritesWhatTheGeneralPathWrites() async throws {
    RelayFastLaneTests.compare(
      fast: Self.comparable(try await run(seed: 3, fastLane: true, writeBehind: false)),
      general: Self.comparable(try await run(seed: 3, fastLane: false, writeBehind: false)))
  }

  /// A cluster node takes the lane by default (it was off on every cluster node before).
  @Test func aClusterNodeTakesTheFastLane() async throws {
    try await TestCluster.with(1) { cluster in #expect(cluster.nodes[0].server.hub.takesRelayFastLane) }
  }
}
