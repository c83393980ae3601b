import Foundation

/// A certificate chain and its private key, PEM files, for `https://` and `wss://` on the
/// server's one port.
public struct TLSFiles: Sendable, Equatable {
  public var certificateChain: String
  public var privateKey: String

  public init(certificateChain: String, privateKey: String) {
    self.certificateChain = certificateChain
    self.privateKey = privateKey
  }

  /// lws only says "cannot create the network context" when a file is missing or unreadable;
  /// this names the file instead.
  func checkReadable() throws(NetError) {
    for (what, path) in [("--tls-cert", certificateChain), ("--tls-key", privateKey)]
    where !FileManager.default.isReadableFile(atPath: path) {
      throw .listenFailed("\(what) \(path) is not a readable file")
    }
  }
}
