import DialtoneCluster
import DialtoneRedis
import DialtoneSupport
import Foundation

/// The node's periodic cluster work, on a thread of its own so that no backlog of messages can
/// delay it: the heartbeat that keeps the node alive, the renewal of its calls' leases, and
/// taking over the calls of nodes that died (checked every lease).
final class ClusterHousekeeping: Sendable {
  private let settings: ClusterLink.Settings
  private let log: Log
  private let running = Locked(false)

  init(settings: ClusterLink.Settings, log: Log) {
    self.settings = settings
    self.log = log
  }

  func start(_ link: ClusterLink) {
    running.withLock { $0 = true }
    let thread = Thread { [self] in run(link) }
    thread.name = "cluster-housekeeping"
    thread.start()
  }

  func stop() { running.withLock { $0 = false } }

  private func run(_ link: ClusterLink) {
    var connection: RedisConnection?
    let clock = ContinuousClock()
    var nextRenewal = clock.now
    var nextScan = clock.now
    var failing = false
    while running.current {
      let started = clock.now
      do {
        let open: RedisConnection
        if let connection, connection.isOpen {
          open = connection
        } else {
          connection?.close()
          open = try RedisConnection(settings.redis)
          connection = open
        }
        try ClusterPresence(open, nodeExpiry: settings.nodeExpiry).heartbeat(settings.node)
        if started >= nextRenewal {
          try link.renewLeases(open)
          nextRenewal = started + settings.lease / 3
        }
        try link.retryUnanswered(open)
        if started >= nextScan {
          try link.adoptOrphans(open)
          nextScan = started + settings.lease / 2
        }
        if failing {
          log.info("the cluster's Redis answers again")
          failing = false
        }
      } catch {
        if !failing { log.error("cluster housekeeping failed: \(error); retrying") }
        failing = true
        connection?.close()
        connection = nil
      }
      let elapsed = clock.now - started
      if elapsed < settings.heartbeat {
        let rest = settings.heartbeat - elapsed
        Thread.sleep(forTimeInterval: Double(rest.components.seconds) + Double(rest.components.attoseconds) / 1e18)
      }
    }
    connection?.close()
  }
}
