import DialtoneCluster
import DialtoneRedis
import DialtoneTestSupport
import Foundation
import Testing

extension RedisTests {
  @Suite struct ClusterPresenceBehaviour {
    private func presence(nodeExpiry: Duration = .seconds(60)) throws -> ClusterPresence {
      ClusterPresence(try SharedRedis.client(), nodeExpiry: nodeExpiry)
    }

    private func user() -> String { "u-" + UUID().uuidString }

    private func node() -> String { "node-" + UUID().uuidString.prefix(8) }

    @Test func devicesOnLiveNodesAreListed() throws {
      let presence = try presence()
      let (alice, n1, n2) = (user(), node(), node())
      try presence.heartbeat(n1)
      try presence.heartbeat(n2)
      let phone = ClusterPresence.Holder(deviceId: "phone", node: n1, sessionID: "s1")
      let laptop = ClusterPresence.Holder(deviceId: "laptop", node: n2, sessionID: "s2")
      #expect(try presence.register(phone, of: alice) == nil)
      #expect(try presence.register(laptop, of: alice) == nil)
      #expect(try presence.devices(of: alice) == [laptop, phone])
      #expect(try presence.devices(of: user()) == [])
    }

    @Test func aDeviceMovingToAnotherNodeNamesItsOldSocket() throws {
      let presence = try presence()
      let (alice, n1, n2) = (user(), node(), node())
      try presence.heartbeat(n1)
      try presence.heartbeat(n2)
      let before = ClusterPresence.Holder(deviceId: "phone", node: n1, sessionID: "s1")
      let after = ClusterPresence.Holder(deviceId: "phone", node: n2, sessionID: "s1")
      try presence.register(before, of: alice)
      #expect(try presence.register(after, of: alice) == before)
      #expect(try presence.register(after, of: alice) == nil)  // the same socket again: nothing replaced
      // The old node's late close does not remove the device's newer socket.
      #expect(try !presence.unregister(before, of: alice))
      #expect(try presence.devices(of: alice) == [after])
      #expect(try presence.unregister(after, of: alice))
      #expect(try presence.devices(of: alice) == [])
    }

    @Test func aSessionWhoseSocketDroppedStaysListedAsOffline() throws {
      let presence = try presence()
      let (alice, n1, n2) = (user(), node(), node())
      try presence.heartbeat(n1)
      try presence.heartbeat(n2)
      let online = ClusterPresence.Holder(deviceId: "phone", node: n1, sessionID: "s1")
      let offline = ClusterPresence.Holder(deviceId: "phone", node: n1, sessionID: "s1", connected: false)
      try presence.register(online, of: alice)
      // The socket dropping and coming back is the same session: nothing to replace.
      #expect(try presence.markOffline(online, of: alice))
      #expect(try presence.devices(of: alice) == [offline])
      #expect(try presence.register(online, of: alice) == nil)
      try presence.register(offline, of: alice)
      // A new session elsewhere replaces it, whatever the state of its socket.
      let elsewhere = ClusterPresence.Holder(deviceId: "phone", node: n2, sessionID: "s2")
      #expect(try presence.register(elsewhere, of: alice) == offline)
      // The old session's socket closing late leaves the newer session as it is.
      #expect(try !presence.markOffline(online, of: alice))
      #expect(try presence.devices(of: alice) == [elsewhere])
      #expect(try !presence.unregister(online, of: alice))
      #expect(try presence.unregister(.init(deviceId: "phone", node: n2, sessionID: "s2", connected: false), of: alice))
      #expect(try presence.devices(of: alice) == [])
    }

    @Test func aDeadNodesDevicesDropOutByThemselves() throws {
      // An hour's node expiry, passed with `KeyClock` rather than waited for: no pause of a busy
      // machine can let the living node's heartbeat lapse between two of the test's steps.
      let presence = try presence(nodeExpiry: .seconds(3600))
      let (alice, dying, living) = (user(), node(), node())
      try presence.heartbeat(dying)
      try presence.heartbeat(living)
      let lost = ClusterPresence.Holder(deviceId: "phone", node: dying, sessionID: "s1")
      let kept = ClusterPresence.Holder(deviceId: "laptop", node: living, sessionID: "s2")
      try presence.register(lost, of: alice)
      try presence.register(kept, of: alice)
      let raw = try SharedRedis.client()
      defer { raw.close() }
      let clock = KeyClock(redis: raw)
      let heartbeats = ["dt:node:{\(dying)}", "dt:node:{\(living)}"]
      // Only `living` keeps beating: `dying` was killed.
      try clock.advance(.seconds(3000), over: heartbeats)
      #expect(try presence.devices(of: alice) == [kept, lost])  // by device id
      try presence.heartbeat(living)
      try clock.advance(.seconds(3000), over: heartbeats)
      #expect(try presence.devices(of: alice) == [kept])
      // Left out, not removed: the session may still resume on another node.
      #expect(try raw.command(["HLEN", .string("dt:presence:{\(alice)}")]) == .integer(2))
      #expect(try !presence.isAlive(dying))
      #expect(try presence.isAlive(living))
    }

    @Test func theClusterMarkIsWrittenOnceAndGoesWithRedisState() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      // A database of its own on one server; a cluster has only database 0 (suites run serially).
      if !redis.isCluster { try redis.command(["SELECT", "14"]) }
      try redis.command(["FLUSHDB"])
      let presence = ClusterPresence(redis, nodeExpiry: .seconds(3))
      #expect(try presence.mark() == nil)
      let first = try presence.markedNow()
      #expect(first != nil)
      #expect(try presence.markedNow() == first)  // a second node reads the first one's
      try redis.command(["FLUSHDB"])  // as a Redis restarted without persistence
      #expect(try presence.mark() == nil)
      #expect(try presence.markedNow() != first)
    }

    @Test func aLeavingNodeDropsOutAtOnce() throws {
      let presence = try presence()
      let (alice, n1) = (user(), node())
      try presence.heartbeat(n1)
      try presence.register(.init(deviceId: "phone", node: n1, sessionID: "s1"), of: alice)
      try presence.leave(n1)
      #expect(try presence.devices(of: alice) == [])
    }

    @Test func namesThatWouldCorruptAnEntryAreRefused() throws {
      let presence = try presence()
      #expect(throws: RedisError.self) { try presence.heartbeat("bad\nnode") }
      #expect(throws: RedisError.self) {
        try presence.register(.init(deviceId: "phone", node: "n", sessionID: "s\n1"), of: user())
      }
      #expect(throws: RedisError.self) { try presence.heartbeat("") }
    }
  }
}
