import DialtoneSupport

/// The same numbers from the same seed on every run (`SplitMix64`), so a generated test that
/// fails replays from its seed.
public struct SeededGenerator: RandomNumberGenerator {
  private var numbers: SplitMix64

  public init(seed: UInt64) { numbers = SplitMix64(seed: seed) }

  public mutating func next() -> UInt64 { numbers.next() }

  /// A number in `0..<n`.
  public mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }

  /// True `percent` times in a hundred.
  public mutating func chance(_ percent: Int) -> Bool { below(100) < percent }

  public mutating func pick<T>(_ options: [T]) -> T { options[below(options.count)] }
}
