/// A node's write-behind log (docs/architecture.md, write-behind point 7): its scripts, measured
/// against today's batch store by `bench/node_log_probe.py`. The store itself is the next commit.
package final class WriteBehindLog: Sendable {}
