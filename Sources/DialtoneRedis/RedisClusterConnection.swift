import DialtoneSupport
import Foundation

/// A Redis Cluster behind the `RedisClient` calls (Debian 12's hiredis 0.14 has no cluster
/// routing): each command goes to the primary that serves its keys' hash slot (`RedisSlot`),
/// over one `RedisConnection` per primary, opened when first needed.
///
/// - The slot map comes from `CLUSTER SLOTS`, asked of the known primaries, then the seeds.
/// - `MOVED` (the slot lives elsewhere now): the slot is remapped, the map refreshed, the command
///   sent again. `ASK` (the slot is being migrated): once to the importing node, after `ASKING`.
/// - `TRYAGAIN`, `CLUSTERDOWN`, or a primary that cannot be connected to (it died; its replica
///   is not promoted yet): the map is refreshed and the command tried again after a bounded
///   backoff (`failoverWait` in all), as nothing of it reached a server.
/// - A connection lost or timed out with a command in flight is thrown, as on one server: the
///   command may have run, and only the caller knows whether running it twice is safe. The
///   next command to that shard connects again, to whichever primary the map names by then.
///
/// A pipeline is split per primary (one round trip to each, in turn) and its replies put back in
/// order; a command redirected in it is sent again on its own afterwards, so it may run after
/// commands that followed it in the pipeline (commands for one slot keep their order unless the
/// slot moved in between). Scripts passed to `load` are loaded on every primary, and again on
/// each connection opened later (a promoted replica does not have them).
///
/// A shard's replicas are asynchronous: a primary that dies may take its last writes with it,
/// and a promoted replica would then hand out a seq a client already saw for another message.
/// So every round trip to a primary that has replicas ends with `WAIT` (`RedisReplicaWait`,
/// from the configuration): its writes count only once enough replicas confirmed them. When
/// they do not in time (a replica lagging, resyncing or cut off), even after another WAIT with
/// the map read again, the round trip fails with `NOREPLICAS` as if its connection had broken
/// with the commands in flight: `command` and `transaction` throw it, and `pipeline` answers it
/// for each command of that shard (the other shards' replies stand). Reads pay nothing (WAIT
/// answers at once when this connection wrote nothing new).
///
/// The map (and with it how many replicas each shard has to wait for) is read again every
/// `mapRefresh`, after a WAIT came back short, and when a WAIT counted a replica the map does
/// not list: a replica added to a shard after this connection opened is waited for from then on.
///
/// Calls block the calling thread, one at a time (a lock serialises them).
public final class RedisClusterConnection: RedisClient, @unchecked Sendable {
  // @unchecked: every mutable property is only touched under `lock`, which every public entry
  // point takes.
  private let lock = Locked()
  public let configuration: RedisConfiguration
  public var isCluster: Bool { true }
  /// How long a command keeps being retried while its shard has no reachable primary (a failover).
  public let failoverWait: Duration
  private let pause: @Sendable (Duration) -> Void
  private var slots: [RedisAddress?] = Array(repeating: nil, count: RedisSlot.count)
  private var primaries: [RedisAddress] = []
  /// How many replicas, not failed, each primary had in the last slot map (`RedisReplicaWait`).
  private var replicas: [RedisAddress: Int] = [:]
  /// How often the map is read again even when nothing pointed at a change.
  public var mapRefresh: Duration { map.interval }
  /// When the map is read again; `map.stale` once something pointed at a change.
  private var map: RedisRereadSchedule
  private var connections: [RedisAddress: RedisConnection] = [:]
  private var scripts: [RedisScript] = []
  private var closed = false

  static let maxRedirects = 5

  public convenience init(_ configuration: RedisConfiguration) throws(RedisError) {
    try self.init(configuration, failoverWait: .seconds(6)) { duration in
      Thread.sleep(forTimeInterval: duration.seconds)
    }
  }

  /// `pause` waits between retries (injected: tests may count instead of sleeping); `clock`
  /// says when the map is due to be read again.
  public init(
    _ configuration: RedisConfiguration, failoverWait: Duration, mapRefresh: Duration = .seconds(5),
    clock: any DialtoneClock = SystemClock(), pause: @escaping @Sendable (Duration) -> Void
  ) throws(RedisError) {
    self.configuration = configuration
    self.failoverWait = failoverWait
    self.pause = pause
    map = RedisRereadSchedule(every: mapRefresh, clock: clock)
    try lock.withLock { () throws(RedisError) in try refresh() }
  }

  private var replicaWait: RedisReplicaWait { configuration.replicaWait }

  deinit {
    for connection in connections.values { connection.close() }
  }

  public var isOpen: Bool { lock.withLock { !closed } }

  public func close() {
    lock.withLock {
      closed = true
      for connection in connections.values { connection.close() }
      connections.removeAll()
    }
  }

  /// The primaries the current slot map names (each serves one range of slots or more).
  public var nodes: [RedisAddress] { lock.withLock { primaries } }

  /// The primary the map names for a key's slot.
  public func node(forKey key: String) -> RedisAddress? {
    lock.withLock { slots[RedisSlot.of(key)] }
  }

  @discardableResult
  public func command(_ arguments: [RedisArgument]) throws(RedisError) -> RedisReply {
    let reply = try lock.withLock { () throws(RedisError) -> RedisReply in
      try checkOpen()
      readMapIfDue()
      switch arguments.first.map({ String(decoding: $0.bytes, as: UTF8.self).uppercased() }) {
      case "SCRIPT"?, "FLUSHALL"?, "FLUSHDB"?, "KEYS"?, "DBSIZE"?:
        return try everywhere(arguments)
      default:
        return try run(arguments, slot: try Self.slot(of: arguments))
      }
    }
    if case .error(let prefix, let message) = reply { throw .server(prefix: prefix, message: message) }
    return reply
  }

  public func pipeline(_ commands: [[RedisArgument]]) throws(RedisError) -> [RedisReply] {
    guard !commands.contains(where: \.isEmpty) else { throw .invalidRequest("a command needs at least its name") }
    return try lock.withLock { () throws(RedisError) -> [RedisReply] in
      try checkOpen()
      readMapIfDue()
      var replies = [RedisReply?](repeating: nil, count: commands.count)
      var groups: [RedisAddress: [Int]] = [:]
      var order: [RedisAddress] = []
      var unmapped: [Int] = []
      for (index, command) in commands.enumerated() {
        let slot: Int?
        do throws(RedisError) {
          slot = try Self.slot(of: command)
        } catch {
          replies[index] = .error(prefix: "CROSSSLOT", message: "\(error)")
          continue
        }
        guard let address = target(slot) else {
          unmapped.append(index)
          continue
        }
        if groups[address] == nil { order.append(address) }
        groups[address, default: []].append(index)
      }
      var again = unmapped
      // Every shard's commands are written first, then every shard's replies read: the shards
      // work at once, one round trip in all rather than one per shard.
      var written: [(address: RedisAddress, indices: [Int], waitingFor: Int)] = []
      for address in order {
        let indices = groups[address] ?? []
        do throws(RedisError) {
          let waitingFor = try write(indices.map { commands[$0] }, to: address)
          written.append((address, indices, waitingFor))
        } catch {
          // Nothing reached that server when it could not be connected to: its commands go
          // again one by one (waiting out a failover). One lost in flight may have run.
          drop(address)
          guard case .connectionFailed = error else {
            for (other, sent, waitingFor) in written {
              _ = try? connections[other]?.receive(count: sent.count + (waitingFor > 0 ? 1 : 0))
            }
            throw error
          }
          again += indices
        }
      }
      var lost: RedisError?
      var waits: [(address: RedisAddress, indices: [Int], waitingFor: Int, reply: RedisReply?)] = []
      for (address, indices, waitingFor) in written {
        do throws(RedisError) {
          guard let link = connections[address] else { throw .connectionLost(message: "the connection is closed") }
          let received = try link.receive(count: indices.count + (waitingFor > 0 ? 1 : 0))
          for (index, reply) in zip(indices, received) {
            if Self.isRedirect(reply) { again.append(index) } else { replies[index] = reply }
          }
          if waitingFor > 0 { waits.append((address, indices, waitingFor, received.last)) }
        } catch {
          drop(address)
          lost = lost ?? error
        }
      }
      if let lost { throw lost }
      // Every shard's replies are in: a WAIT that came back short may now read the map and
      // WAIT again. Commands whose shard's replicas did not confirm them are refused (they may
      // have run, as with a connection lost in flight); a redirected one runs again below.
      for (address, indices, waitingFor, reply) in waits where !confirmed(address, reply, waitingFor: waitingFor) {
        let refusal = replicaWait.refusal(of: "\(address)")
        for index in indices where replies[index] != nil {
          replies[index] = .error(prefix: "NOREPLICAS", message: refusal)
        }
      }
      for index in again.sorted() {
        do throws(RedisError) {
          replies[index] = try run(commands[index], slot: try? Self.slot(of: commands[index]))
        } catch {
          guard error.serverPrefix == "NOREPLICAS", case .server(let prefix, let message) = error else { throw error }
          replies[index] = .error(prefix: prefix, message: message)
        }
      }
      return replies.map { $0 ?? .null }
    }
  }

  public func transaction(_ commands: [[RedisArgument]]) throws(RedisError) -> [RedisReply] {
    guard !commands.isEmpty else { return [] }
    if commands.count == 1 { return try pipeline(commands) }
    return try lock.withLock { () throws(RedisError) -> [RedisReply] in
      try checkOpen()
      readMapIfDue()
      var slot: Int?
      for command in commands {
        guard let this = try Self.slot(of: command) else { continue }
        if let slot, slot != this {
          throw .invalidRequest("CROSSSLOT: a transaction's keys must share one hash slot on a Redis Cluster")
        }
        slot = this
      }
      var attempt = 0
      while true {
        attempt += 1
        let replies = try run(batch: [["MULTI"]] + commands + [["EXEC"]], slot: slot, attempt: attempt)
        guard let exec = replies.last else { throw .unexpectedReply(.null) }
        if case .error(let prefix, let message) = exec {
          // EXECABORT: a command was refused when queued (nothing ran); a redirect there means
          // the slot moved: try again once the map knows where.
          if prefix == "EXECABORT", replies.contains(where: Self.isRedirect), attempt < Self.maxRedirects {
            if let moved = replies.first(where: { $0.movedTarget != nil })?.movedTarget {
              try? refresh(preferring: moved.address)
              slots[moved.slot] = moved.address
            } else {
              try? refresh()
            }
            backoff(attempt)
            continue
          }
          throw .server(prefix: prefix, message: message)
        }
        guard let results = exec.elements, results.count == commands.count else { throw .unexpectedReply(exec) }
        return results
      }
    }
  }

  public func load(_ scripts: [RedisScript]) throws(RedisError) {
    try lock.withLock { () throws(RedisError) in
      try checkOpen()
      // Scripts known already are on every connection (each loads them all as it opens).
      let new = scripts.filter { !self.scripts.contains($0) }
      guard !new.isEmpty else { return }
      self.scripts += new
      for address in primaries {
        let open = connections[address] != nil
        let connection = try connection(address)
        // A connection opened just now loaded every script already.
        if open { try connection.load(new) }
      }
    }
  }

  // MARK: Routing (called under `lock`)

  /// Where a slot lives; any primary for a keyless command.
  private func target(_ slot: Int?) -> RedisAddress? {
    guard let slot else { return primaries.first }
    return slots[slot]
  }

  private func checkOpen() throws(RedisError) {
    if closed { throw .connectionLost(message: "the connection is closed") }
  }

  /// Reads the map again when something pointed at a change (`stale`) or `mapRefresh` passed;
  /// a map that cannot be read now leaves the old one (the command's own retries read it again).
  private func readMapIfDue() {
    guard map.due() else { return }
    try? refresh()
  }

  /// Sends one command where its slot lives, following redirects; the reply, errors included.
  private func run(_ arguments: [RedisArgument], slot: Int?) throws(RedisError) -> RedisReply {
    try run(batch: [arguments], slot: slot, attempt: 1)[0]
  }

  /// Sends the commands, in one round trip, where `slot` lives (any primary for nil), and again
  /// on MOVED, ASK, TRYAGAIN, CLUSTERDOWN or a primary that cannot be reached, within bounds.
  /// Redirects are read from the first command's reply (MULTI's queued replies for a transaction
  /// are its later ones: `transaction` reads them).
  private func run(batch: [[RedisArgument]], slot: Int?, attempt first: Int) throws(RedisError) -> [RedisReply] {
    var asking: RedisAddress?
    var asked = false
    var attempt = first
    var waited = Duration.zero
    while true {
      if map.stale {
        map.stale = false
        try? refresh()
      }
      guard let address = asking ?? target(slot) else {
        // No primary serves the slot (the map is being repaired): wait and look again.
        guard waited < failoverWait else {
          throw .server(prefix: "CLUSTERDOWN", message: "no primary serves slot \(slot ?? -1)")
        }
        waited += backoff(attempt)
        attempt += 1
        map.stale = true
        continue
      }
      let replies: [RedisReply]
      do throws(RedisError) {
        replies =
          asking != nil
          ? Array(try send([["ASKING"]] + batch, to: address).dropFirst()) : try send(batch, to: address)
      } catch {
        if error.serverPrefix == "NOREPLICAS" { throw error }
        drop(address)
        map.stale = true
        // Connecting failed: nothing was sent, so waiting out the failover is safe.
        guard case .connectionFailed = error, waited < failoverWait else { throw error }
        waited += backoff(attempt)
        attempt += 1
        asking = nil
        continue
      }
      let head = batch.count > 1 && replies.count > 1 && replies[0] == .status("OK") ? replies[1] : replies[0]
      guard case .error(let prefix, _) = head else { return replies }
      switch prefix {
      case "MOVED" where attempt < Self.maxRedirects:
        // The node that now serves the slot knows the new map for certain (another may not yet).
        if let target = head.movedTarget {
          try? refresh(preferring: target.address)
          slots[target.slot] = target.address
        }
        asking = nil
        attempt += 1
      case "ASK" where !asked:
        guard let target = head.movedTarget else { return replies }
        asking = target.address
        asked = true
      case "TRYAGAIN", "CLUSTERDOWN":
        guard waited < failoverWait else { return replies }
        waited += backoff(attempt)
        attempt += 1
        map.stale = prefix == "CLUSTERDOWN"
        asking = nil
      default:
        return replies
      }
    }
  }

  /// A keyless command every primary must run (SCRIPT LOAD, FLUSHALL); KEYS and DBSIZE add up.
  private func everywhere(_ arguments: [RedisArgument]) throws(RedisError) -> RedisReply {
    var keys: [RedisReply] = []
    var total: Int64 = 0
    var last = RedisReply.null
    for address in primaries {
      let reply = try connection(address).pipeline([arguments])[0]
      if case .error = reply { return reply }
      keys += reply.elements ?? []
      total += reply.integer ?? 0
      last = reply
    }
    switch last {
    case .array: return .array(keys)
    case .integer: return .integer(total)
    default: return last
    }
  }

  /// Waits before attempt `attempt + 1`: 25 ms doubling up to 400 ms. How long it waited.
  @discardableResult
  private func backoff(_ attempt: Int) -> Duration {
    let wait = Duration.milliseconds(min(400, 25 << min(max(0, attempt - 1), 4)))
    pause(wait)
    return wait
  }

  /// Writes the commands to `address`, and WAIT after them when the shard has replicas to wait
  /// for: how many (0: no WAIT was written; its reply follows the batch's otherwise).
  private func write(_ batch: [[RedisArgument]], to address: RedisAddress) throws(RedisError) -> Int {
    let link = try connection(address)
    let waitingFor = replicaWait.needed(known: replicas[address] ?? 0)
    guard waitingFor > 0 else {
      try link.send(batch)
      return 0
    }
    try link.send(batch + [replicaWait.command(for: waitingFor)])
    return waitingFor
  }

  /// One round trip to `address`, ended by WAIT when the shard has replicas to wait for; throws
  /// `NOREPLICAS` when too few confirmed the writes.
  private func send(_ batch: [[RedisArgument]], to address: RedisAddress) throws(RedisError) -> [RedisReply] {
    let waitingFor = try write(batch, to: address)
    guard let link = connections[address] else { throw .connectionLost(message: "the connection is closed") }
    let received = try link.receive(count: batch.count + (waitingFor > 0 ? 1 : 0))
    if waitingFor > 0, !confirmed(address, received.last, waitingFor: waitingFor) {
      throw .server(prefix: "NOREPLICAS", message: replicaWait.refusal(of: "\(address)"))
    }
    return Array(received.prefix(batch.count))
  }

  /// Whether the writes before a WAIT that answered `reply` reached the replicas they must
  /// (`RedisReplicaWait.confirm`): before each further WAIT the map is read again (a replica the
  /// cluster marked failed stops counting; one promoted ends the wait, as this server no longer
  /// serves the slots). Either way short or surprising, the map is read before the next round trip.
  private func confirmed(_ address: RedisAddress, _ reply: RedisReply?, waitingFor first: Int) -> Bool {
    let outcome = replicaWait.confirm(
      reply, waitingFor: first,
      recount: { () -> Int? in
        try? refresh()
        guard primaries.contains(address), let link = connections[address], link.isOpen else { return nil }
        return replicaWait.needed(known: replicas[address] ?? 0)
      },
      wait: { (count: Int) throws(RedisError) -> RedisReply in
        guard let link = connections[address] else { throw .connectionLost(message: "the connection is closed") }
        do throws(RedisError) {
          return try link.command(try replicaWait.command(for: count))
        } catch {
          if error.isConnectionLost { drop(address) }
          throw error
        }
      })
    switch outcome {
    case .confirmed(let acknowledged):
      // A replica the map does not list confirmed: read the map again, so that it counts.
      if acknowledged > replicas[address] ?? 0 { map.stale = true }
      return true
    case .refused:
      map.stale = true
      return false
    }
  }

  private func connection(_ address: RedisAddress) throws(RedisError) -> RedisConnection {
    if let open = connections[address], open.isOpen { return open }
    connections[address]?.close()
    connections[address] = nil
    // The node's own connection does not WAIT: this one does, knowing the shard's replicas.
    var node = configuration.node(address)
    node.replicaWait.replicas = 0
    let opened = try RedisConnection(node)
    if !scripts.isEmpty {
      do {
        try opened.load(scripts)
      } catch {
        opened.close()
        throw error
      }
    }
    connections[address] = opened
    return opened
  }

  private func drop(_ address: RedisAddress) {
    connections[address]?.close()
    connections[address] = nil
  }

  /// Reads the slot map from the first server that answers: the known primaries, then the seeds.
  private func refresh(preferring preferred: RedisAddress? = nil) throws(RedisError) {
    var tried: Set<RedisAddress> = []
    var lastError = RedisError.connectionFailed(message: "no seed to ask for the slot map")
    let candidates =
      (preferred.map { [$0] } ?? []) + primaries.filter { connections[$0] != nil } + primaries
      + (configuration.clusterSeeds ?? [])
    for address in candidates where tried.insert(address).inserted {
      do throws(RedisError) {
        let link = try connection(address)
        try apply(try link.command(["CLUSTER", "SLOTS"]), askedOf: address)
        // CLUSTER SLOTS leaves out a replica that has replicated nothing yet (a fresh shard),
        // which must still be waited for: CLUSTER SHARDS (7.0) lists every replica and its health.
        if let shards = try? link.command(["CLUSTER", "SHARDS"]) { countReplicas(shards) }
        return
      } catch {
        if case .connectionFailed = error { drop(address) } else if error.isConnectionLost { drop(address) }
        lastError = error
      }
    }
    throw .connectionFailed(message: "no Redis Cluster node gave its slot map: \(lastError)")
  }

  private func apply(_ reply: RedisReply, askedOf asked: RedisAddress) throws(RedisError) {
    guard let ranges = reply.elements, !ranges.isEmpty else {
      throw .unexpectedReply(reply)
    }
    var map = [RedisAddress?](repeating: nil, count: RedisSlot.count)
    var found: [RedisAddress] = []
    var replicaCounts: [RedisAddress: Int] = [:]
    for range in ranges {
      guard let parts = range.elements, parts.count >= 3, let start = parts[0].integer, let end = parts[1].integer,
        let node = parts[2].elements, node.count >= 2, let port = node[1].integer,
        (0..<Int64(RedisSlot.count)).contains(start), (start..<Int64(RedisSlot.count)).contains(end)
      else { throw .unexpectedReply(reply) }
      // An empty host means "the address you asked me on" (cluster-preferred-endpoint-type).
      let host = node[0].string.flatMap { $0.isEmpty || $0 == "?" ? nil : $0 } ?? asked.host
      let address = RedisAddress(host: host, port: Int(port))
      if !found.contains(address) { found.append(address) }
      replicaCounts[address] = max(replicaCounts[address] ?? 0, parts.count - 3)
      for slot in Int(start)...Int(end) { map[slot] = address }
    }
    slots = map
    primaries = found
    replicas = replicaCounts
    for address in connections.keys where !found.contains(address) { drop(address) }
  }

  /// The replicas of each primary that are not failed, from CLUSTER SHARDS (RESP2: each shard
  /// and each node a flat list of names and values).
  private func countReplicas(_ reply: RedisReply) {
    var counts: [RedisAddress: Int] = [:]
    for shard in reply.elements ?? [] {
      let fields = Self.fields(shard)
      let nodes = (fields["nodes"]?.elements ?? []).map(Self.fields)
      func port(_ node: [String: RedisReply]) -> Int? {
        let tls = configuration.tls != nil ? node["tls-port"]?.integer : nil
        return (tls ?? node["port"]?.integer).map(Int.init)
      }
      guard let primary = nodes.first(where: { $0["role"]?.string == "master" }), let primaryPort = port(primary)
      else { continue }
      let hosts = [primary["ip"]?.string, primary["endpoint"]?.string, primary["hostname"]?.string].compactMap { $0 }
      guard
        let address = primaries.first(where: { $0.port == primaryPort && hosts.contains($0.host) })
          ?? primaries.first(where: { $0.port == primaryPort })
      else { continue }
      counts[address] = nodes.filter { $0["role"]?.string == "replica" && $0["health"]?.string != "fail" }.count
    }
    for (address, count) in counts { replicas[address] = max(replicas[address] ?? 0, count) }
  }

  private static func fields(_ reply: RedisReply) -> [String: RedisReply] {
    let flat = reply.elements ?? []
    var fields: [String: RedisReply] = [:]
    for index in stride(from: 0, to: flat.count - 1, by: 2) {
      if let name = flat[index].string { fields[name] = flat[index + 1] }
    }
    return fields
  }

  /// The one slot a command's keys share; nil for a command without keys.
  static func slot(of command: [RedisArgument]) throws(RedisError) -> Int? {
    guard let keys = RedisSlot.keys(of: command) else { return nil }
    let slots = Set(keys.map(RedisSlot.of))
    guard slots.count == 1, let slot = slots.first else {
      throw .invalidRequest("CROSSSLOT: the keys of a command must share one hash slot on a Redis Cluster")
    }
    return slot
  }

  static func isRedirect(_ reply: RedisReply) -> Bool {
    guard case .error(let prefix, _) = reply else { return false }
    return ["MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"].contains(prefix)
  }
}

extension RedisReply {
  /// The slot and node of a MOVED or ASK error ("MOVED 3999 127.0.0.1:6381").
  public var movedTarget: (slot: Int, address: RedisAddress)? {
    guard case .error(let prefix, let message) = self, prefix == "MOVED" || prefix == "ASK" else { return nil }
    let parts = message.split(separator: " ")
    guard parts.count == 2, let slot = Int(parts[0]), (0..<RedisSlot.count).contains(slot),
      let colon = parts[1].lastIndex(of: ":"), let port = Int(parts[1][parts[1].index(after: colon)...])
    else { return nil }
    var host = String(parts[1][..<colon])
    if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
    return (slot, RedisAddress(host: host, port: port))
  }
}
