import Foundation

/// Polls `condition` until it holds or `seconds` of real time pass. Tests assert the outcome,
/// never the timing. The first checks only yield, so work queued on other tasks runs at once.
public func eventually(
  isolation: isolated (any Actor)? = #isolation, within seconds: Double = 5, _ condition: () async -> Bool
) async -> Bool {
  for _ in 0..<200 {
    if await condition() { return true }
    await Task.yield()
  }
  let deadline = Date().addingTimeInterval(seconds)
  while Date() < deadline {
    if await condition() { return true }
    try? await Task.sleep(for: .milliseconds(2))
  }
  return await condition()
}
