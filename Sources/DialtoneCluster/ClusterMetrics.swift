import DialtoneMetrics
import DialtoneRedis

/// What a cluster node counts (`/metrics`, protocol.md 16.9), registered with the server's others.
package struct ClusterMetrics: Sendable {
  package let transactions: Counter
  package let steps: Counter
  package let storeFailures: Counter
  /// `kind`: frame, request, device, replaced, broken, reply.
  package let letters: MetricFamily<Counter>
  package let takeovers: Counter
  package let sessionsHeld: Gauge
  package let senderQueue: Gauge
  /// Round trips to a Redis Cluster primary whose writes its replicas confirmed only on a later
  /// WAIT (`late`) or not in time at all (`unconfirmed`: refused as not stored).
  package let replicaWaits: MetricFamily<Counter>
  /// Write-behind batches sent, by what sent them (`WriteBehindBatch.Cut`: window, urgent, full),
  /// and the frames they carried.
  package let batches: MetricFamily<Counter>
  package let batchFrames: Counter
  /// Answers to forwarded requests a write-behind node dropped because `maxWaitingReplies` of them
  /// waited for their events already (their requests are routed again and handled afresh).
  package let answersOverBound: Counter

  package init(registry r: MetricsRegistry) {
    transactions =
      r.counter(
        "dialtone_cluster_store_transactions_total", "Transactions that stored session messages in the cluster's Redis."
      ).unlabelled
    steps =
      r.counter("dialtone_cluster_store_steps_total", "Session steps (messages, acks, letters) those carried.")
      .unlabelled
    storeFailures =
      r.counter(
        "dialtone_cluster_store_failures_total", "Messages that could not be stored (their sessions resync)."
      ).unlabelled
    letters = r.counter(
      "dialtone_cluster_letters_total",
      "Letters read from this node's inbox, by kind (frame, request, device, replaced, broken, reply).",
      labels: ["kind"])
    takeovers =
      r.counter("dialtone_cluster_takeovers_total", "Live calls this node took over from the shared journal.")
      .unlabelled
    sessionsHeld =
      r.gauge("dialtone_cluster_sessions_held", "Sessions whose socket this node holds or last held.").unlabelled
    senderQueue =
      r.gauge("dialtone_cluster_sender_queue", "Cluster jobs waiting for Redis on this node.").unlabelled
    replicaWaits = r.counter(
      "dialtone_cluster_redis_replica_waits_total",
      "Redis Cluster round trips whose writes replicas confirmed only on a later WAIT (late) or not in time"
        + " (unconfirmed: refused as not stored).",
      labels: ["outcome"])
    batches = r.counter(
      "dialtone_cluster_write_behind_batches_total",
      "Write-behind batches sent to Redis, by what sent them (window, urgent, full).", labels: ["cut"])
    batchFrames =
      r.counter("dialtone_cluster_write_behind_batch_frames_total", "Frames those batches carried.").unlabelled
    answersOverBound =
      r.counter(
        "dialtone_cluster_write_behind_answers_dropped_total",
        "Answers to forwarded requests dropped because too many waited for their events to be stored."
      ).unlabelled
  }

  /// What a node's Redis connections report of their WAITs, counted in `replicaWaits`.
  package func replicaObserver() -> RedisReplicaObserver {
    let waits = replicaWaits
    return RedisReplicaObserver { outcome in
      waits.labels(outcome == .unconfirmed ? "unconfirmed" : "late").increment()
    }
  }
}
