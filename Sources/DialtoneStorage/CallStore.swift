import DialtoneProtocol
import Foundation

/// Where finished calls are read from. They are written by `CallJournal` through a
/// `LiveCallStore`, in the transaction that ends the live call.
public protocol CallStore: Sendable {
  /// The user's calls (as caller or callee), newest first, strictly older than `cursor`.
  func history(of userId: String, limit: Int, before cursor: HistoryCursor?, blocked: BlockedCallsInHistory)
    async throws -> [CallRecord]
}

extension CallStore {
  public func history(of userId: String, limit: Int, before cursor: HistoryCursor?) async throws -> [CallRecord] {
    try await history(of: userId, limit: limit, before: cursor, blocked: .hide)
  }
}

/// Position in a user's history: (createdAt, callId), so equal timestamps still page correctly.
public struct HistoryCursor: Sendable, Equatable {
  public let createdAt: Int64
  public let callId: String

  public init(createdAt: Int64, callId: String) {
    self.createdAt = createdAt
    self.callId = callId
  }

  public init?(token: String) {
    guard let separator = token.firstIndex(of: "_"), let createdAt = Int64(token[..<separator]) else { return nil }
    let callId = String(token[token.index(after: separator)...])
    guard !callId.isEmpty, !callId.utf8.contains(0) else { return nil }
    self.init(createdAt: createdAt, callId: callId)
  }

  public var token: String { "\(createdAt)_\(callId)" }
}
