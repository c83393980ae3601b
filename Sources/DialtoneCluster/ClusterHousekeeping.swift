import DialtoneRedis
import DialtoneSupport
import Foundation

/// The node's periodic cluster work, on threads of its own so that no backlog of messages can
/// delay it. The heartbeat that keeps the node alive, and with it a write-behind node's lease,
/// beats on a thread that does nothing else: the other duties (noticing a Redis that lost the
/// cluster's state, renewing its calls' leases and its sessions, storing the clients'
/// acknowledgements (`PendingAcknowledgements`), and taking over the calls of nodes that died,
/// which reads the live calls from PostgreSQL behind the journal's writes) may wait on a slow
/// database, and a heartbeat waiting behind them lapsed the lease of a node that was running.
package final class ClusterHousekeeping: Sendable {
  private let settings: ClusterLink.Settings
  private let beat: RedisLoopThread
  private let loop: RedisLoopThread

  /// When each less frequent duty is next due.
  private struct Schedule: Sendable {
    package var nextRenewal: ContinuousClock.Instant
    package var nextScan: ContinuousClock.Instant
    package var nextRefresh: ContinuousClock.Instant
    package var lastPass: ContinuousClock.Instant
  }

  package init(settings: ClusterLink.Settings, log: Log) {
    self.settings = settings
    beat = RedisLoopThread(name: "cluster-heartbeat", redis: settings.redis, retryPause: settings.heartbeat, log: log)
    loop = RedisLoopThread(
      name: "cluster-housekeeping", redis: settings.redis, retryPause: settings.heartbeat, log: log)
  }

  package func start(_ link: ClusterLink) {
    let clock = ContinuousClock()
    let settings = settings
    beat.start((), failing: "the cluster heartbeat failed", recovered: "the cluster heartbeat goes on") {
      _, connection in
      let started = clock.now
      try ClusterPresence(connection, nodeExpiry: settings.nodeExpiry).heartbeat(settings.node)
      // Write-behind counts its lease from when this renewal was sent (`WriteBehindHolder`).
      link.writeBehind?.leaseRenewed(sentAt: started)
      self.beat.pause(settings.heartbeat - (clock.now - started))
    }
    loop.start(
      Schedule(nextRenewal: clock.now, nextScan: clock.now, nextRefresh: clock.now, lastPass: clock.now),
      failing: "cluster housekeeping failed",
      recovered: "the cluster's Redis answers again"
    ) { schedule, connection in
      let started = clock.now
      try link.checkClusterMark(connection)
      // A pass later than the node's expiry (this node stalled, or Redis was away): other nodes
      // may have taken its calls over meanwhile, so the leases are checked at once.
      let stalled = started - schedule.lastPass > settings.nodeExpiry
      schedule.lastPass = started
      if stalled || started >= schedule.nextRenewal {
        try link.renewLeases(connection)
        schedule.nextRenewal = started + settings.lease / 3
      }
      if started >= schedule.nextRefresh {
        try link.refreshSessions(connection)
        schedule.nextRefresh = started + settings.sessionRefresh
      }
      try link.retryUnanswered(connection)
      try link.storeAcknowledgements(connection)
      if started >= schedule.nextScan {
        try link.adoptOrphans(connection)
        schedule.nextScan = started + settings.lease / 2
      }
      self.loop.pause(settings.heartbeat - (clock.now - started))
    }
  }

  package func stop() {
    loop.stop()
    beat.stop()
  }
}
