/// A client's request whose event a write-behind holder refused (`ClusterEvent.requestsRefused`).
package struct RefusedRequest: Sendable, Equatable {
  package let sessionID: String
  package let requestID: String

  package init(sessionID: String, requestID: String) {
    self.sessionID = sessionID
    self.requestID = requestID
  }
}
