import DialtoneCluster
import DialtoneRedis
import DialtoneSupport
import Foundation

/// Reads this node's inbox on a thread of its own (XREAD blocks) and hands each batch of
/// letters on in the order they were sent; a letter that does not decode is logged and skipped.
/// Letters are removed once handed on. A lost connection is retried until `stop`.
final class ClusterInboxReader: Sendable {
  private let settings: ClusterLink.Settings
  private let log: Log
  private let loop: RedisLoopThread

  init(settings: ClusterLink.Settings, log: Log) {
    self.settings = settings
    self.log = log
    loop = RedisLoopThread(name: "cluster-inbox", redis: settings.redis, retryPause: .milliseconds(200), log: log)
  }

  func start(_ deliver: @escaping @Sendable ([ClusterLetter]) -> Void) {
    let (settings, log) = (settings, log)
    // The wait must stay shorter than the connection's command timeout, and bounds how long
    // `stop` waits for the read in progress (a letter arrives at once whatever it is).
    let wait = Duration.milliseconds(100)
    // The state is the id of the last letter handed on.
    loop.start("0", failing: "cannot read this node's inbox", recovered: "reading this node's inbox again") {
      after, connection in
      let mailbox = ClusterLink.mailbox(connection, settings)
      let letters = try mailbox.receive(settings.node, after: after, limit: 512, timeout: wait)
      guard let last = letters.last else { return }
      var decoded: [ClusterLetter] = []
      decoded.reserveCapacity(letters.count)
      for letter in letters {
        do {
          decoded.append(try ClusterLetterCodec.decode(letter.payload))
        } catch {
          log.error("skipped a letter that does not decode: \(error)")
        }
      }
      if !decoded.isEmpty { deliver(decoded) }
      after = last.id
      try mailbox.discard(letters.map(\.id), from: settings.node)
    }
  }

  func stop() { loop.stop() }
}
