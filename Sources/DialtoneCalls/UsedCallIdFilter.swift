import DialtoneProtocol
import DialtoneSupport
import Foundation

/// The call ids ever used, held in memory as a scalable Bloom filter, so that the desk can decide
/// an invite with a new id on its own thread: `mayContain` false means the id was certainly never
/// added, true only that it may have been (then the store is asked, as without the filter).
/// Nothing is ever removed (the history is never pruned), so an id once added is never answered
/// "never used" again.
///
/// It grows in stages without the ids it holds: when a stage is full, a stage twice its size
/// takes the new ids, with a false-positive rate half its predecessor's, so that the rate of the
/// whole stays under twice the first stage's. Past `maxIds` it is full: it answers "maybe" for
/// every id and every invite goes to the store again, as without it (memory stays bounded).
///
/// Memory: about 1.4 bytes per id in the first stage (0.5 % false positives, 8 hashes), 1.6 in
/// the second, and so on; for a history of a million calls, sized at start-up for two million
/// ids, 2.8 MB.
package struct UsedCallIdFilter: Sendable {
  private struct Stage: Sendable {
    var words: [UInt64]
    let bitCount: UInt64
    let hashes: Int
    let capacity: Int
    var count = 0

    init(capacity: Int, falsePositiveRate: Double) {
      // m = -n ln p / (ln 2)², k = (m / n) ln 2: the smallest filter with rate p at n ids.
      let bits = max(64, Int((-Double(capacity) * log(falsePositiveRate) / (0.693_147 * 0.693_147)).rounded(.up)))
      let wordCount = (bits + 63) / 64
      words = Array(repeating: 0, count: wordCount)
      bitCount = UInt64(wordCount * 64)
      hashes = max(1, Int((Double(bits) / Double(capacity) * 0.693_147).rounded()))
      self.capacity = capacity
    }

    /// Bit `i` of `hashes` probes (double hashing: `a + i b`).
    private func bit(_ i: Int, _ a: UInt64, _ b: UInt64) -> (word: Int, mask: UInt64) {
      let position = (a &+ UInt64(i) &* b) % bitCount
      return (Int(position / 64), 1 << (position % 64))
    }

    func mayContain(_ a: UInt64, _ b: UInt64) -> Bool {
      for i in 0..<hashes {
        let (word, mask) = bit(i, a, b)
        if words[word] & mask == 0 { return false }
      }
      return true
    }

    mutating func insert(_ a: UInt64, _ b: UInt64) {
      for i in 0..<hashes {
        let (word, mask) = bit(i, a, b)
        words[word] |= mask
      }
      count += 1
    }
  }

  private var stages: [Stage]
  /// Past this many ids added, the filter answers "maybe" for every id.
  package let maxIds: Int
  package private(set) var count = 0
  /// The first stage's false-positive rate; the whole stays under twice it.
  package static let falsePositiveRate = 0.005
  /// Ten million ids: at most ~55 MB of bits (grown stage by stage from the smallest start),
  /// ~23 MB for a filter sized at start-up for two million.
  package static let defaultMaxIds = 10_000_000

  /// A filter for `expected` ids (at least a few thousand) before its first growth.
  package init(expected: Int, maxIds: Int = Self.defaultMaxIds) {
    self.maxIds = maxIds
    stages = [Stage(capacity: max(4096, expected), falsePositiveRate: Self.falsePositiveRate)]
  }

  /// Whether the id may have been added: false is certain, true is "ask the store".
  package func mayContain(_ callId: CallID) -> Bool {
    guard !isFull else { return true }
    let (a, b) = Self.hashes(callId)
    return stages.contains { $0.mayContain(a, b) }
  }

  /// Records an id as used (a no-op once full: every id is "maybe" then).
  package mutating func insert(_ callId: CallID) {
    guard !isFull else { return }
    count += 1
    let (a, b) = Self.hashes(callId)
    if let last = stages.indices.last, stages[last].count >= stages[last].capacity {
      let previous = stages[last]
      stages.append(
        Stage(
          capacity: previous.capacity * 2,
          falsePositiveRate: Self.falsePositiveRate / Double(1 << min(stages.count, 30))))
    }
    stages[stages.count - 1].insert(a, b)
  }

  /// Whether it answers "maybe" for every id (more than `maxIds` were added).
  package var isFull: Bool { count > maxIds }

  /// How many stages it has grown to (tests).
  package var stageCount: Int { stages.count }

  /// Bytes of bits held (the memory the docs state).
  package var bytes: Int { stages.reduce(0) { $0 + $1.words.count * 8 } }

  /// Two 64-bit hashes of the id from one pass of the process's seeded hasher (the seed differs
  /// per process, so a client cannot choose ids that collide on purpose; a collision would cost
  /// only a look-up in the store anyway). The second is odd so that the probes cover the bits.
  private static func hashes(_ callId: CallID) -> (UInt64, UInt64) {
    var hasher = Hasher()
    hasher.combine(callId)
    let a = UInt64(bitPattern: Int64(hasher.finalize()))
    // SplitMix64's first output from the first hash: a second hash independent enough of it for
    // double hashing.
    var mixer = SplitMix64(seed: a)
    return (a, mixer.next() | 1)
  }
}
