import DialtoneRedis
import DialtoneSupport
import Foundation

/// Reads this node's inbox on a thread of its own (XREAD blocks) and hands each batch of
/// letters on in the order they were sent; a letter that does not decode is logged and skipped.
/// Letters are removed once handed on. A lost connection is retried until `stop`.
package final class ClusterInboxReader: Sendable {
  private let settings: ClusterLink.Settings
  private let log: Log
  private let loop: RedisLoopThread

  package init(settings: ClusterLink.Settings, log: Log) {
    self.settings = settings
    self.log = log
    loop = RedisLoopThread(name: "cluster-inbox", redis: settings.redis, retryPause: .milliseconds(200), log: log)
  }

  /// `unnumbered`: where letters for write-behind sessions go, each with its position, a read's
  /// consecutive ones together (one hand-off for them, not one per letter; nil: such letters are
  /// skipped as undecodable); `mayRead`: whether to read on now (a
  /// write-behind holder with too much waiting for Redis pauses its inbox); `trimPoint`: how far
  /// the inbox may be trimmed once read through an id (nil: not yet), for letters that must
  /// outlive their reading (it may ask Redis, on the reader's connection).
  package func start(
    _ deliver: @escaping @Sendable ([ClusterLetter]) -> Void,
    unnumbered: (@Sendable ([(UnnumberedLetter, position: String)]) -> Void)? = nil,
    mayRead: (@Sendable () -> Bool)? = nil,
    trimPoint: (@Sendable (String, any RedisClient) throws(RedisError) -> String?)? = nil
  ) {
    let (settings, log) = (settings, log)
    // The wait must stay shorter than the connection's command timeout, and bounds how long
    // `stop` waits for the read in progress (a letter arrives at once whatever it is).
    let wait = Duration.milliseconds(100)
    // The state: the id of the last letter handed on, and how far the inbox was trimmed. Handled
    // letters are removed in runs (every 64, or once nothing more came), not after each read.
    loop.start(Position(), failing: "cannot read this node's inbox", recovered: "reading this node's inbox again") {
      position, connection in
      if let mayRead, !mayRead() {
        Thread.sleep(forTimeInterval: 0.01)
        return
      }
      let mailbox = ClusterLink.mailbox(connection, settings)
      let letters = try mailbox.receive(settings.node, after: position.after, limit: 512, timeout: wait)
      guard let last = letters.last else {
        if position.untrimmed > 0,
          let through = try trimPoint.map({ try $0(position.after, connection) }) ?? position.after
        {
          try mailbox.discard(through: through, from: settings.node)
          position.untrimmed = 0
        }
        return
      }
      // Each run of letters of one kind is handed on whole, the runs in inbox order: the letters
      // before a letter reach the hub (or the holder) before it.
      var decoded: [ClusterLetter] = []
      var frames: [(UnnumberedLetter, position: String)] = []
      decoded.reserveCapacity(letters.count)
      for letter in letters {
        do {
          if unnumbered != nil, let frame = try UnnumberedLetter.decode(letter.payload) {
            if !decoded.isEmpty { deliver(decoded) }
            decoded.removeAll()
            frames.append((frame, letter.id))
            continue
          }
          let next = try ClusterLetterCodec.decode(letter.payload)
          if !frames.isEmpty { unnumbered?(frames) }
          frames.removeAll()
          decoded.append(next)
        } catch {
          log.error("skipped a letter that does not decode: \(error)")
        }
      }
      if !decoded.isEmpty { deliver(decoded) }
      if !frames.isEmpty { unnumbered?(frames) }
      position.after = last.id
      position.untrimmed += letters.count
      if position.untrimmed >= 64, let through = try trimPoint.map({ try $0(last.id, connection) }) ?? last.id {
        try mailbox.discard(through: through, from: settings.node)
        position.untrimmed = 0
      }
    }
  }

  private struct Position: Sendable {
    package var after = "0"
    package var untrimmed = 0
  }

  package func stop() { loop.stop() }
}
