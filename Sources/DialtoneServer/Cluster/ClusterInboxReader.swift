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
  private let running = Locked(false)

  init(settings: ClusterLink.Settings, log: Log) {
    self.settings = settings
    self.log = log
  }

  func start(_ deliver: @escaping @Sendable ([ClusterLetter]) -> Void) {
    running.withLock { $0 = true }
    let thread = Thread { [self] in run(deliver) }
    thread.name = "cluster-inbox"
    thread.start()
  }

  func stop() { running.withLock { $0 = false } }

  private func run(_ deliver: @Sendable ([ClusterLetter]) -> Void) {
    var connection: RedisConnection?
    var after = "0"
    var failing = false
    // The wait must stay shorter than the connection's command timeout.
    let wait = Duration.milliseconds(500)
    while running.current {
      do {
        let open: RedisConnection
        if let connection, connection.isOpen {
          open = connection
        } else {
          connection?.close()
          open = try RedisConnection(settings.redis)
          connection = open
        }
        let mailbox = ClusterLink.mailbox(open, settings)
        let letters = try mailbox.receive(settings.node, after: after, limit: 512, timeout: wait)
        if failing {
          log.info("reading this node's inbox again")
          failing = false
        }
        guard let last = letters.last else { continue }
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
      } catch {
        if !failing { log.error("cannot read this node's inbox: \(error); retrying") }
        failing = true
        connection?.close()
        connection = nil
        Thread.sleep(forTimeInterval: 0.2)
      }
    }
    connection?.close()
  }
}
