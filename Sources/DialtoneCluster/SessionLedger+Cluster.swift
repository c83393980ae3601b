import DialtoneRedis

/// The ledger's steps on a Redis Cluster, where a script may touch only the keys of one hash
/// slot. On one Redis a step is one script across the session, the holder's heartbeat and
/// inbox, and the user's presence, and a batch of steps is one MULTI/EXEC. Here each step is
/// split along its slots, in at most three round trips per batch (each a pipeline per shard):
///
/// 1. the presence of each user a `deliver` names (the user's slot, read only);
/// 2. every append (one script in its session's slot: the seq, the log, the reply and once
///    memories, exactly as on one Redis, returning the letter instead of sending it), every
///    acknowledgement;
/// 3. the letters, in the steps' order: each append's `notifyScript` in its holder's slot (the
///    heartbeat and inbox share the node's tag, so "send only to a live holder" stays one
///    atomic check), the answer letters, and the presence entries of sessions found gone.
///
/// What this costs, and why the guarantees hold:
/// - A batch is no longer all-or-nothing across sessions: this node dying mid-batch may leave
///   some sessions with their message and others without. Each message is still stored whole
///   or not at all in its own session (one script), so no session has a gap; the others simply
///   lack the message, which is what happens when a node dies just before a batch. The nodes
///   that take a dead node's calls over send again what the call still needs, and what they send
///   twice is stopped by the same once-keys (rings) and request ids (answers) as on one Redis.
/// - A message stored but whose letter never left (the node died between rounds 2 and 3) waits
///   in the log: its holder finds the gap at the next letter for that session and reads the log
///   (`range`), or the client gets it on its next resume. It is delayed, never lost or doubled.
/// - An answer and what the request caused are no longer one transaction: a requester whose
///   forwarded request's owner died unanswered routes it again (`retryUnanswered`), and the new
///   owner answers a repeat as the first time (`ForwardedAnswers`).
/// - A delivery reads the presence before it appends: a device registering meanwhile is
///   missed by this message exactly as if it had registered just after (its own resume or
///   fresh session brings it up to date).
/// - Round trips: an append for a session held here is one; one held on another node adds the
///   letter's round trip; a delivery adds the presence read.
extension SessionLedger {
  /// One Redis command a step needs, and what its reply means.
  private enum Part {
    case append(step: Int, session: String)
    case deliverAppend(step: Int, session: String, device: String, entry: String)
    case acknowledge(step: Int)
    case letter(step: Int)
    case notify(step: Int, seq: UInt64)
    case forget(step: Int)

    var step: Int {
      switch self {
      case .append(let step, _), .deliverAppend(let step, _, _, _), .acknowledge(let step), .letter(let step),
        .notify(let step, _), .forget(let step):
        step
      }
    }
  }

  /// A delivery's sessions as they settle.
  private struct Delivery {
    var here: [Stored] = []
    var stored = 0
    var failure: RedisError?
  }

  func runSplit(_ steps: [Step], from node: String) throws(RedisError) -> [StepResult] {
    try redis.load(Self.scripts)
    var results = [StepResult?](repeating: nil, count: steps.count)
    var deliveries: [Int: Delivery] = [:]

    // 1. Presence of the users that deliveries name.
    let delivering = steps.indices.filter { if case .deliver = steps[$0] { return true } else { return false } }
    var presence: [Int: [(device: String, entry: String)]] = [:]
    if !delivering.isEmpty {
      let replies = try redis.pipeline(
        delivering.map { index in
          guard case .deliver(_, let user, let device, _, _) = steps[index] else { return ["PING"] }
          // One device's entry is read alone (a relayed message is for one device).
          if let device { return ["HGET", ClusterPresence.userKey(user), .string(device)] }
          return ["HGETALL", ClusterPresence.userKey(user)]
        })
      for (index, reply) in zip(delivering, replies) {
        guard case .deliver(_, _, let device, _, _) = steps[index] else { continue }
        if let device, reply.failure == nil {
          switch reply {
          case .null: presence[index] = []
          default:
            guard let entry = reply.string else {
              results[index] = .failed(.unexpectedReply(reply))
              continue
            }
            presence[index] = [(device: device, entry: entry)]
          }
          deliveries[index] = Delivery()
          continue
        }
        guard let entries = reply.fieldsAndValues else {
          results[index] = .failed(reply.failure ?? .unexpectedReply(reply))
          continue
        }
        presence[index] = entries.map { (device: $0.field, entry: $0.value) }
        deliveries[index] = Delivery()
      }
    }

    // 2. The appends and acknowledgements, each in its session's slot.
    var parts: [Part] = []
    var commands: [[RedisArgument]] = []
    for (index, step) in steps.enumerated() where results[index] == nil {
      switch step {
      case .append(_, let session, _, _), .acknowledge(let session, _):
        let (script, keys, arguments) = try command(step, from: node)
        parts.append(step.isAcknowledgement ? .acknowledge(step: index) : .append(step: index, session: session))
        commands.append(RedisConnection.evalsha(script, keys: keys, arguments: arguments))
      case .deliver(let frame, _, let device, let skipping, let once):
        let shared = try shared(frame, requestID: nil, once: once)
        for (listed, entry) in presence[index] ?? []
        where (device == nil || device == listed) && !skipping.contains(listed) {
          let fields = entry.split(separator: "\n", omittingEmptySubsequences: false)
          guard fields.count == 3, !fields[1].isEmpty else { continue }
          let session = String(fields[1])
          parts.append(.deliverAppend(step: index, session: session, device: listed, entry: entry))
          commands.append(
            RedisConnection.evalsha(
              Self.appendScript, keys: Self.keys(session).all, arguments: [.string(node), .string(session)] + shared))
        }
      case .letter:
        break  // with the notifications, in order
      }
    }
    let replies = commands.isEmpty ? [] : try redis.pipeline(commands)

    // 3. Letters to holders, answer letters, and presence entries of gone sessions, in order.
    var lateParts: [Part] = []
    var late: [[RedisArgument]] = []
    var appended: [Int: AppendResult] = [:]
    var partIndex = 0
    for (index, step) in steps.enumerated() where results[index] == nil {
      /// A delivered append's answer other than a letter to send.
      func settle(_ reply: RedisReply, _ session: String, _ device: String, _ entry: String) {
        do throws(RedisError) {
          switch try Self.appendResult(reply.checked(), session) {
          case .here(let stored):
            deliveries[index]?.stored += 1
            deliveries[index]?.here.append(stored)
          case .sent, .kept: deliveries[index]?.stored += 1
          case .duplicate: break
          case .gone:
            lateParts.append(.forget(step: index))
            late.append(
              RedisConnection.evalsha(
                Self.forgetScript, keys: [ClusterPresence.userKey(Self.user(of: steps[index]))],
                arguments: [.string(device), .string(entry)]))
          }
        } catch {
          deliveries[index]?.failure = error
        }
      }

      if case .letter = step {
        let (script, keys, arguments) = try command(step, from: node)
        lateParts.append(.letter(step: index))
        late.append(RedisConnection.evalsha(script, keys: keys, arguments: arguments))
        continue
      }
      while partIndex < parts.count, parts[partIndex].step == index {
        let reply = replies[partIndex]
        switch parts[partIndex] {
        case .acknowledge:
          results[index] = reply.failure.map { .failed($0) } ?? .acknowledged
        case .append(_, let session):
          if let (seq, letter, holder) = Self.unsent(reply, session) {
            lateParts.append(.notify(step: index, seq: seq))
            late.append(notify(letter, to: holder))
          } else {
            do throws(RedisError) {
              appended[index] = try Self.appendResult(reply.checked(), session)
            } catch {
              results[index] = .failed(error)
            }
          }
        case .deliverAppend(_, let session, let device, let entry):
          if let (seq, letter, holder) = Self.unsent(reply, session) {
            deliveries[index]?.stored += 1
            lateParts.append(.notify(step: index, seq: seq))
            late.append(notify(letter, to: holder))
          } else {
            settle(reply, session, device, entry)
          }
        default:
          break
        }
        partIndex += 1
      }
    }
    let lateReplies = late.isEmpty ? [] : try redis.pipeline(late)
    for (part, reply) in zip(lateParts, lateReplies) {
      switch part {
      case .letter(let index):
        do throws(RedisError) {
          results[index] = try Self.result(ofLetter: reply.checked())
        } catch {
          results[index] = .failed(error)
        }
      case .notify(let index, let seq):
        // Stored either way; a failed letter only delays it (the holder finds the gap).
        if case .deliver = steps[index] { continue }
        appended[index] = reply == .integer(1) ? .sent(seq: seq) : .kept(seq: seq)
      case .forget:
        break  // a stale entry left behind costs a lookup, not a message
      default:
        break
      }
    }
    for (index, result) in appended { results[index] = .appended(result) }
    for (index, delivery) in deliveries {
      results[index] =
        delivery.failure.map { .failed($0) } ?? .delivered(here: delivery.here, stored: delivery.stored)
    }
    return results.map { $0 ?? .failed(.unexpectedReply(.null)) }
  }

  private func notify(_ letter: [UInt8], to holder: String) -> [RedisArgument] {
    RedisConnection.evalsha(
      Self.notifyScript, keys: [ClusterPresence.nodeKey(holder), NodeMailbox.inbox(holder)],
      arguments: [
        .bytes(letter), .integer(Int64(limits.inboxCapacity)),
        (try? .milliseconds(limits.inboxExpiry)) ?? .integer(120_000),
      ])
  }

  /// A {5, seq, holder, bytes} answer: the seq, the holder's letter and the holder.
  private static func unsent(_ reply: RedisReply, _ session: String) -> (UInt64, [UInt8], String)? {
    guard let parts = reply.elements, parts.count == 4, parts[0] == .integer(5), let seq = parts[1].integer,
      let holder = parts[2].string, let frame = parts[3].bytes
    else { return nil }
    let header = letterHeader(sessionID: session, seq: UInt64(clamping: seq))
    return (UInt64(clamping: seq), Array(header.utf8) + [UInt8(ascii: "\n")] + frame, holder)
  }

  private static func user(of step: Step) -> String {
    if case .deliver(_, let user, _, _, _) = step { return user }
    return ""
  }

  private static func result(ofLetter reply: RedisReply) throws(RedisError) -> StepResult {
    switch reply {
    case .bulk(let id): return .sent(.sent(id: String(decoding: id, as: UTF8.self)))
    case .null: return .sent(.full)
    default: throw .unexpectedReply(reply)
    }
  }
}

extension SessionLedger.Step {
  fileprivate var isAcknowledgement: Bool {
    if case .acknowledge = self { return true }
    return false
  }
}
