/// One LiveKit API key and its secret: the key is the `iss` of every token the pair signs, which
/// is how a LiveKit server (and our webhook verifier) picks the secret to check a token with.
package struct LiveKitCredentials: Sendable, Hashable {
  package var apiKey: String
  package var apiSecret: String

  package init(apiKey: String, apiSecret: String) {
    self.apiKey = apiKey
    self.apiSecret = apiSecret
  }

  package var secretBytes: [UInt8] { Array(apiSecret.utf8) }
}
