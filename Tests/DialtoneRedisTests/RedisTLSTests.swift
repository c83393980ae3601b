import DialtoneRedis
import DialtoneTLS
import DialtoneTestSupport
import Foundation
import Testing

/// Redis over TLS (`rediss://`), as managed services and any Redis off the node's loopback need:
/// the server's certificate is checked against the CA and the address, a client certificate is
/// shown when the server asks for one, and every command kind (plain, pipeline, script, pub/sub)
/// works over it.
@Suite struct RedisTLSTests {
  @Test func commandsPipelinesScriptsAndSubscriptionsRunOverTLS() async throws {
    try await ScratchRedis.withTLS { server, certificates in
      let configuration = try RedisConfiguration(url: server.url)
      #expect(configuration.tls?.caFile == certificates.ca && "\(configuration)".hasPrefix("rediss://"))

      let connection = try RedisConnection(configuration)
      #expect(try connection.command(["PING"]) == .status("PONG"))
      let value = Array(0...255).map(UInt8.init) + Array(repeating: 0x41, count: 100_000)
      try connection.command(["SET", "big", .bytes(value)])
      #expect(try connection.command(["GET", "big"]) == .bulk(value))
      let increments: [[RedisArgument]] = Array(repeating: ["INCR", "counter"], count: 50)
      let replies = try connection.pipeline(increments + [["GET", "counter"]])
      #expect(replies.last == .bulk(Array("50".utf8)))
      let script = RedisScript("return redis.call('INCRBY', KEYS[1], ARGV[1])")
      #expect(try connection.eval(script, keys: ["counter"], arguments: ["5"]) == .integer(55))

      let subscriber = try RedisSubscriber(configuration, channels: ["news"])
      let sent = (0..<100).map { RedisMessage(channel: "news", payload: Array("m\($0)".utf8)) }
      _ = try connection.pipeline(sent.map { ["PUBLISH", "news", .bytes($0.payload)] })
      var received: [RedisMessage] = []
      for try await message in subscriber.messages {
        received.append(message)
        if received.count == sent.count { break }
      }
      #expect(received == sent)
      subscriber.stop()
    }
  }

  @Test func anUntrustedCertificateOrAnotherAddressIsRefused() async throws {
    try await ScratchRedis.withTLS { server, certificates in
      let base = "rediss://127.0.0.1:\(server.port)"
      for (url, why) in [
        ("\(base)?ca-file=\(certificates.otherCA)", "another CA"),
        ("\(base)?ca-file=\(certificates.ca)&server-name=redis.example.com", "another name"),
        ("redis://127.0.0.1:\(server.port)", "plain TCP to a TLS port"),
      ] {
        do throws(RedisError) {
          let connection = try RedisConnection(url: url, connectTimeout: .seconds(2), commandTimeout: .seconds(2))
          _ = try connection.command(["PING"])
          Issue.record("connected with \(why)")
        } catch {
          #expect(error.isConnectionLost || "\(error)".contains("cannot connect"), "\(why): \(error)")
        }
      }
    }
  }

  @Test func aServerThatAsksForAClientCertificateGetsOne() async throws {
    try await ScratchRedis.withTLS(requireClientCertificate: true) { server, certificates in
      let connection = try RedisConnection(url: server.url)
      #expect(try connection.command(["PING"]) == .status("PONG"))
      let without = "rediss://127.0.0.1:\(server.port)?ca-file=\(certificates.ca)"
      #expect(throws: RedisError.self) {
        let anonymous = try RedisConnection(url: without, connectTimeout: .seconds(2), commandTimeout: .seconds(2))
        _ = try anonymous.command(["PING"])
      }
    }
  }
}
