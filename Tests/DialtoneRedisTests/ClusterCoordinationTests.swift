import DialtoneCluster
import DialtoneRedis
import DialtoneTestSupport
import Foundation
import Testing

extension RedisTests {
  @Suite struct CallOwnershipBehaviour {
    private func ownership(_ lease: Duration = .seconds(60)) throws -> CallOwnership {
      CallOwnership(try SharedRedis.client(), leaseDuration: lease)
    }

    private func call() -> String { "c-" + UUID().uuidString }

    @Test func oneNodeOwnsACallUntilItReleasesIt() throws {
      let ownership = try ownership()
      let id = call()
      #expect(try ownership.claim(id, for: "n1"))
      #expect(try ownership.claim(id, for: "n1"))  // its own claim again: renewed
      #expect(try !ownership.claim(id, for: "n2"))
      #expect(try ownership.owner(of: id) == "n1")
      #expect(try !ownership.release(id, by: "n2"))
      #expect(try ownership.release(id, by: "n1"))
      #expect(try ownership.owner(of: id) == nil)
      #expect(try ownership.claim(id, for: "n2"))
    }

    @Test func aCallPlacedOnceIsFoundUnderEachOfItsUsersUntilItEnds() throws {
      let ownership = try ownership()
      let (id, alice, bob) = (call(), "u-" + UUID().uuidString, "u-" + UUID().uuidString)
      #expect(try ownership.place(id, for: "n1", users: [alice, bob]) == "n1")
      // The second node to place the same call learns who has it, and lists nothing.
      #expect(try ownership.place(id, for: "n2", users: [bob]) == "n1")
      #expect(try ownership.calls(of: alice).map { "\($0.callId)@\($0.owner)" } == ["\(id)@n1"])
      #expect(try ownership.calls(of: bob).map(\.owner) == ["n1"])
      try ownership.finish(id, by: "n1", users: [alice, bob])
      #expect(try ownership.calls(of: alice).isEmpty)
      #expect(try ownership.owner(of: id) == nil)
    }

    /// An invite goes where a glare or busy decision can see the other call: a call of the callee
    /// to the caller, or a connected call of the callee, that another node runs.
    @Test func anInviteIsPlacedNearTheCallItsCalleeIsRingingOrTalkingIn() throws {
      let ownership = try ownership()
      let (alice, bob, carol) = ("u-" + UUID().uuidString, "u-" + UUID().uuidString, "u-" + UUID().uuidString)
      let bobsCall = call()
      #expect(try ownership.place(bobsCall, for: "n2", users: [bob, alice]) == "n2")
      // Glare: Alice calls Bob from n1 while his call to her, on n2, rings.
      let alicesCall = call()
      #expect(try ownership.placeInvite(alicesCall, for: "n1", caller: alice, callee: bob) == .near(bobsCall))
      #expect(try ownership.owner(of: alicesCall) == nil)
      // Bob's call with Alice is not Carol's: hers is placed on her own node, and again there.
      let carolsCall = call()
      #expect(try ownership.placeInvite(carolsCall, for: "n3", caller: carol, callee: bob) == .owner("n3"))
      #expect(try ownership.placeInvite(carolsCall, for: "n1", caller: carol, callee: bob) == .owner("n3"))
      // Busy: once Bob talks in his call, a call to him goes there.
      try ownership.talking(bobsCall, users: [bob, alice])
      let another = call()
      #expect(try ownership.placeInvite(another, for: "n3", caller: carol, callee: bob) == .near(bobsCall))
      // The node that runs the other call decides itself: the invite is placed there.
      #expect(try ownership.placeInvite(another, for: "n2", caller: carol, callee: bob) == .owner("n2"))
      #expect(try ownership.calls(of: carol).map(\.callId).contains(another))
      // When the call ends, its users are free again.
      try ownership.finish(bobsCall, by: "n2", users: [bob, alice])
      #expect(try ownership.placeInvite(alicesCall, for: "n1", caller: alice, callee: bob) == .owner("n1"))
    }

    @Test func aCallWhoseLeaseExpiredLeavesItsUsersListsWhenRead() async throws {
      let ownership = try ownership(.milliseconds(200))
      let (id, alice) = (call(), "u-" + UUID().uuidString)
      #expect(try ownership.place(id, for: "n1", users: [alice]) == "n1")
      let gone = await eventually(within: 10) { (try? ownership.calls(of: alice))?.isEmpty == true }
      #expect(gone)
    }

    @Test func aDeadOwnersCallIsClaimedByAnotherAndTheOldOwnerLearnsItLostIt() throws {
      // An hour's lease, passed with `KeyClock` rather than waited for: no pause of a busy machine
      // can let a lease just claimed lapse before the test reads it.
      let ownership = try ownership(.seconds(3600))
      let (kept, lost) = (call(), call())
      #expect(try ownership.claim(kept, for: "n1"))
      #expect(try ownership.claim(lost, for: "n1"))
      let raw = try SharedRedis.client()
      defer { raw.close() }
      let clock = KeyClock(redis: raw)
      let leases = ["dt:call-owner:{\(kept)}", "dt:call-owner:{\(lost)}"]
      // n1 renews only `kept`, then stalls past the lease of `lost`; n2 claims that one.
      try clock.advance(.seconds(3000), over: leases)
      #expect(try !ownership.claim(lost, for: "n2"))
      #expect(try ownership.renew([kept], for: "n1") == [])
      try clock.advance(.seconds(3000), over: leases)
      #expect(try ownership.claim(lost, for: "n2"))
      #expect(try ownership.claim(kept, for: "n1"))
      #expect(try ownership.renew([kept, lost], for: "n1") == [lost])
      #expect(try ownership.owner(of: lost) == "n2")
      #expect(try ownership.owner(of: kept) == "n1")
    }

    @Test func concurrentClaimsOnThreeNodesHaveOneWinner() async throws {

      for _ in 0..<20 {
        let id = call()
        let winners = try await withThrowingTaskGroup(of: Bool.self) { group in
          for node in ["n1", "n2", "n3"] {
            group.addTask {
              try CallOwnership(try SharedRedis.client(), leaseDuration: .seconds(60)).claim(id, for: node)
            }
          }
          var count = 0
          for try await won in group where won { count += 1 }
          return count
        }
        #expect(winners == 1)
      }
    }
  }

  @Suite struct EffectOnceBehaviour {
    @Test func theFirstNodeToNoticeAnEffectPerformsItAlone() async throws {

      let callId = UUID().uuidString
      let effect = EffectOnce.push(callId: callId, userId: "bob", deviceId: "phone", ring: 1)
      let firsts = try await withThrowingTaskGroup(of: Bool.self) { group in
        for node in ["n1", "n2", "n3"] {
          group.addTask { try EffectOnce(try SharedRedis.client(), memory: .seconds(60)).first(effect, by: node) }
        }
        var count = 0
        for try await first in group where first { count += 1 }
        return count
      }
      #expect(firsts == 1)
      let once = EffectOnce(try SharedRedis.client(), memory: .seconds(60))
      #expect(try once.claimant(of: effect) != nil)
      // A re-ring is another effect.
      #expect(try once.first(EffectOnce.push(callId: callId, userId: "bob", deviceId: "phone", ring: 2), by: "n1"))
    }

    @Test func keysOfDifferentDevicesNeverCollide() {
      // A colon in an id cannot make two different pushes one key.
      #expect(
        EffectOnce.push(callId: "c", userId: "a:b", deviceId: "c", ring: 1)
          != EffectOnce.push(callId: "c", userId: "a", deviceId: "b:c", ring: 1))
    }

    @Test func theMarkExpires() async throws {
      let once = EffectOnce(try SharedRedis.client(), memory: .milliseconds(200))
      let effect = "accept:" + UUID().uuidString
      #expect(try once.first(effect, by: "n1"))
      let forgotten = await eventually(within: 10) { (try? once.claimant(of: effect)) == .some(nil) }
      #expect(forgotten)
      #expect(try once.first(effect, by: "n2"))
    }
  }

  @Suite struct NodeMailboxBehaviour {
    private func node() -> String { "node-" + UUID().uuidString.prefix(8) }

    @Test func lettersArriveInOrderAndStayUntilDiscarded() throws {

      let mailbox = NodeMailbox(try SharedRedis.client(), capacity: 100, expiry: .seconds(60))
      let target = node()
      var sent: [String] = []
      for n in 1...5 {
        guard case .sent(let id) = try mailbox.send(Array("letter \(n)\r\n\u{0}".utf8), to: target) else {
          Issue.record("letter \(n) refused")
          return
        }
        sent.append(id)
      }
      let first = try mailbox.receive(target, after: "0", limit: 3, timeout: .milliseconds(100))
      #expect(first.map(\.id) == Array(sent.prefix(3)))
      #expect(first.map(\.payload) == (1...3).map { Array("letter \($0)\r\n\u{0}".utf8) })
      let rest = try mailbox.receive(target, after: first[2].id, limit: 10, timeout: .milliseconds(100))
      #expect(rest.map(\.id) == Array(sent.suffix(2)))
      // Read but not discarded: a reader that restarts reads them again.
      #expect(try mailbox.backlog(of: target) == 5)
      // Discarded through the third: the two after it stay.
      try mailbox.discard(through: sent[2], from: target)
      #expect(
        try mailbox.receive(target, after: "0", limit: 10, timeout: .milliseconds(50)).map(\.id)
          == Array(sent.suffix(2)))
      try mailbox.discard(sent, from: target)
      #expect(try mailbox.backlog(of: target) == 0)
      #expect(try mailbox.receive(target, after: "0", limit: 10, timeout: .milliseconds(50)) == [])
    }

    @Test func aFullInboxRefusesRatherThanDropUnread() throws {
      let mailbox = NodeMailbox(try SharedRedis.client(), capacity: 2, expiry: .seconds(60))
      let target = node()
      guard case .sent(let id) = try mailbox.send([1], to: target) else {
        Issue.record("first letter refused")
        return
      }
      #expect(try mailbox.send([2], to: target) != .full)
      #expect(try mailbox.send([3], to: target) == .full)
      try mailbox.discard([id], from: target)
      #expect(try mailbox.send([3], to: target) != .full)
      #expect(
        try mailbox.receive(target, after: "0", limit: 10, timeout: .milliseconds(50)).map(\.payload) == [[2], [3]])
    }

    @Test func aWaitingReaderWakesForALetter() async throws {

      let target = node()
      // From "0" on an empty inbox the read waits for the first letter, whether it was sent
      // before or after the read began.
      let readerRedis = try SharedRedis.client()
      let reader = Task.detached {
        try NodeMailbox(readerRedis, capacity: 10, expiry: .seconds(60))
          .receive(target, after: "0", limit: 1, timeout: .seconds(4))
      }
      try await Task.sleep(for: .milliseconds(200))
      let sender = NodeMailbox(try SharedRedis.client(), capacity: 10, expiry: .seconds(60))
      #expect(try sender.send(Array("wake".utf8), to: target) != .full)
      let letters = try await reader.value
      #expect(letters.map(\.payload) == [Array("wake".utf8)])
    }

    @Test func aWaitLongerThanTheCommandTimeoutIsRefused() throws {

      let mailbox = NodeMailbox(try SharedRedis.client(commandTimeout: .seconds(1)), capacity: 10, expiry: .seconds(60))
      #expect(throws: RedisError.self) {
        try mailbox.receive(node(), after: "0", limit: 1, timeout: .seconds(2))
      }
    }

    @Test func aDeadNodesInboxExpires() async throws {
      let mailbox = NodeMailbox(try SharedRedis.client(), capacity: 10, expiry: .milliseconds(200))
      let target = node()
      #expect(try mailbox.send([1], to: target) != .full)
      let gone = await eventually(within: 10) { (try? mailbox.backlog(of: target)) == 0 }
      #expect(gone)
    }
  }
}
