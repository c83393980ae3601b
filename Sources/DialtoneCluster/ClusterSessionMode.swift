/// How a cluster keeps the sessions a node holds (`--cluster-sessions`).
package enum ClusterSessionMode: String, Sendable, CaseIterable {
  /// Redis numbers and stores every message before the holder writes it (`SessionLedger`).
  case storeFirst = "store-first"
  /// The holder numbers its sessions, writes a relayed candidate at once and stores it after,
  /// and stores the rest in batches before writing it (`WriteBehindShell`). Incomplete: see
  /// docs/deploy.md for what it does not cover yet. Every node of a cluster must run the same mode.
  case writeBehind = "write-behind"
}
