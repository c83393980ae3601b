/// One LiveKit API key and its secret: the key is the `iss` of every token the pair signs, which
/// is how a LiveKit server (and our webhook verifier) picks the secret to check a token with.
struct LiveKitCredentials: Sendable, Hashable {
  var apiKey: String
  var apiSecret: String

  init(apiKey: String, apiSecret: String) {
    self.apiKey = apiKey
    self.apiSecret = apiSecret
  }

  var secretBytes: [UInt8] { Array(apiSecret.utf8) }
}
