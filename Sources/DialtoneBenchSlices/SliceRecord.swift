/// What one slice of an interleaved run measured, for both targets: the loaded one's load, and
/// the other's idle cost and the tail of its previous slice's messages.
package struct SliceRecord: Sendable, Equatable {
  package var loaded: SliceTarget
  package var seconds: Double
  /// CPU seconds each target spent over the slice, indexed by `SliceTarget.rawValue`.
  package var cpuSeconds: [Double]
  /// The kernel's part of `cpuSeconds` (clock-tick resolution), indexed the same way.
  package var systemSeconds: [Double]
  /// Messages each target relayed over the slice, indexed the same way.
  package var messages: [Int]

  package init(loaded: SliceTarget, seconds: Double, cpuSeconds: [Double], systemSeconds: [Double], messages: [Int]) {
    self.loaded = loaded
    self.seconds = seconds
    self.cpuSeconds = cpuSeconds
    self.systemSeconds = systemSeconds
    self.messages = messages
  }

  func cpu(_ target: SliceTarget) -> Double {
    cpuSeconds.indices.contains(target.rawValue) ? cpuSeconds[target.rawValue] : 0
  }
  func system(_ target: SliceTarget) -> Double {
    systemSeconds.indices.contains(target.rawValue) ? systemSeconds[target.rawValue] : 0
  }
  func relayed(_ target: SliceTarget) -> Int {
    messages.indices.contains(target.rawValue) ? messages[target.rawValue] : 0
  }
}
