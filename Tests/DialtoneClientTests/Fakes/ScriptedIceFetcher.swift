import DialtoneProtocol
import Foundation

struct FetchFailed: Error {}

/// A fetcher that answers from a script: each call takes the next step (the last repeats).
actor ScriptedIceFetcher {
  enum Step: Sendable {
    case servers([IceServer], ttl: Int)
    case fail
    /// Never returns (until `releaseHung()`), ignoring cancellation.
    case hang
  }

  private var script: [Step]
  private(set) var calls = 0
  private var hung: [CheckedContinuation<Void, Never>] = []

  init(_ script: [Step]) { self.script = script }

  func setScript(_ steps: [Step]) { script = steps }

  func fetch() async throws -> (servers: [IceServer], ttl: Int) {
    calls += 1
    let step = script.count > 1 ? script.removeFirst() : (script.first ?? .fail)
    switch step {
    case .servers(let servers, let ttl): return (servers, ttl)
    case .fail: throw FetchFailed()
    case .hang:
      await withCheckedContinuation { hung.append($0) }
      throw FetchFailed()
    }
  }

  func releaseHung() {
    let waiting = hung
    hung = []
    for continuation in waiting { continuation.resume() }
  }
}
