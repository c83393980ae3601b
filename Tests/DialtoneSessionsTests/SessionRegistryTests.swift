import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneSessions

/// The registry's look-ups by device (one device inline, more in a table: `DeviceSessions`)
/// against a plain model, `user → device → session`, after every step of generated histories.
struct SessionRegistryTests {
  private static let users = ["alice", "bob", "carol", "a-very-long-user-id-of-more-than-fifteen-bytes"]
  private static let devices = ["phone", "tablet", "desk", "watch", "a-device-id-longer-than-fifteen-bytes"]

  private static func session(_ n: Int, _ user: String, _ device: String) -> LocalSession {
    LocalSession(
      id: "s\(n)", identity: Identity(userId: user, deviceId: device, name: nil), socket: nil,
      now: Date(timeIntervalSince1970: 0), capacity: 8, maxUnackedBytes: 1 << 16, replyMemory: 2)
  }

  @Test(arguments: 0..<24) func lookUpsAreTheModels(seed: Int) {
    var random = SeededGenerator(seed: UInt64(seed) &+ 0x5E55)
    let registry = SessionRegistry()
    var model: [String: [String: LocalSession]] = [:]
    var made: [LocalSession] = []
    for step in 0..<400 {
      if made.isEmpty || random.chance(55) {
        // A new session for a device: it replaces the device's session, if it had one.
        let user = random.pick(Self.users)
        // Some users get many devices, most one or two.
        let device = random.pick(seed % 3 == 0 ? Self.devices : Array(Self.devices.prefix(2)))
        // A copy of the ids' text, not the same storage: compared by content.
        let session = Self.session(step, String(decoding: Array(user.utf8), as: UTF8.self), device)
        made.append(session)
        registry.add(session)
        model[user, default: [:]][device] = session
      } else {
        // Any session made so far leaves, the current one of its device or a replaced one
        // (which changes nothing in the table by device).
        let session = random.pick(made)
        registry.remove(session)
        let who = session.identity
        if model[who.userId]?[who.deviceId] === session {
          model[who.userId]?[who.deviceId] = nil
          if model[who.userId]?.isEmpty == true { model[who.userId] = nil }
        }
      }
      for user in Self.users + ["nobody"] {
        let expected = model[user] ?? [:]
        #expect(registry.deviceCount(of: user) == expected.count)
        let listed = registry.sessions(of: user)
        #expect(listed.count == expected.count && listed.isEmpty == expected.isEmpty)
        var seen: [String: ObjectIdentifier] = [:]
        for (device, session) in listed { seen[device] = ObjectIdentifier(session) }
        #expect(seen == expected.mapValues { ObjectIdentifier($0) }, "seed \(seed) step \(step)")
        for device in Self.devices + ["nothing", "phon", "phones", "Phone"] {
          let found = registry.session(of: user, device: device)
          #expect(found === expected[device], "seed \(seed) step \(step) \(user) \(device)")
          #expect(registry.session(of: Identity(userId: user, deviceId: device, name: nil)) === found)
          #expect(listed[device] === found)
        }
      }
    }
  }
}
