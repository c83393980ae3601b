import DialtoneNet
import DialtoneProtocol
import DialtoneStorage
import Foundation

/// Phone-number directories (protocol.md §16.11): `PUT /v1/directory/{userId}` for the app's
/// backend (`--directory-token`; 404 without one), `GET /v1/directory?since=` for the user's
/// devices.
struct DirectoryRoutes {
  let authenticator: TokenAuthenticator
  let backend: SharedSecretCredential?
  let store: any DirectoryStore

  func register(in router: inout Router) {
    router.add(.PUT, "/v1/directory/{userId}") { request in
      guard let backend else {
        throw HTTPError.notFound("directory uploads are off: start the server with --directory-token")
      }
      try backend.check(request)
      let userId = request.pathParameters["userId"] ?? ""
      guard !userId.isEmpty, userId.utf8.count <= Limits.maxUserIDBytes else {
        throw HTTPError.badRequest("a user id is 1 to \(Limits.maxUserIDBytes) bytes")
      }
      let upload: DirectoryUpload
      do throws(ProtocolError) {
        upload = try MessageCodec.decode(DirectoryUpload.self, from: request.body)
      } catch {
        throw HTTPError(status: error.code.httpStatus, code: error.code.rawValue, message: error.message)
      }
      let (identify, block) = try Self.validate(upload)
      return .wire(try await store.replaceDirectory(of: userId, identify: identify, block: block))
    }

    router.add(.GET, "/v1/directory") { request in
      let identity = try authenticator.authenticate(request)
      var since: Int64?
      if let text = request.query["since"] {
        guard let parsed = Int64(text), parsed >= 0 else {
          throw HTTPError.badRequest("since must be a version (0 or more)")
        }
        since = parsed
      }
      return .wire(try await store.directory(of: identity.userId, since: since))
    }
  }

  /// The lists as numbers, or an error naming the first bad entry.
  static func validate(_ upload: DirectoryUpload) throws(HTTPError) -> ([Int64: String], Set<Int64>) {
    guard upload.identify.count <= DirectoryLimits.maxIdentificationEntries else {
      throw HTTPError.badRequest("identify holds at most \(DirectoryLimits.maxIdentificationEntries) entries")
    }
    guard upload.block.count <= DirectoryLimits.maxBlockedNumbers else {
      throw HTTPError.badRequest("block holds at most \(DirectoryLimits.maxBlockedNumbers) numbers")
    }
    var identify: [Int64: String] = [:]
    var firstIndex: [Int64: Int] = [:]
    for (index, entry) in upload.identify.enumerated() {
      let number = try Self.number(entry.number, at: "identify[\(index)].number")
      let label = entry.label
      guard !label.isEmpty, label.utf8.count <= DirectoryLimits.maxLabelBytes,
        !label.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
      else {
        throw HTTPError.badRequest(
          "identify[\(index)].label must be 1 to \(DirectoryLimits.maxLabelBytes) bytes without control characters")
      }
      if let first = firstIndex[number] {
        throw HTTPError.badRequest("identify[\(index)].number repeats identify[\(first)].number")
      }
      firstIndex[number] = index
      identify[number] = label
    }
    var block: [Int64: Int] = [:]
    for (index, text) in upload.block.enumerated() {
      let number = try Self.number(text, at: "block[\(index)]")
      if let first = block[number] { throw HTTPError.badRequest("block[\(index)] repeats block[\(first)]") }
      block[number] = index
    }
    return (identify, Set(block.keys))
  }

  private static func number(_ text: String, at path: String) throws(HTTPError) -> Int64 {
    guard let number = PhoneNumber.parse(text) else {
      let shown = text.count > 32 ? String(text.prefix(32)) + "…" : text
      throw HTTPError.badRequest("\(path) \"\(shown)\" is not an E.164 number (a + and 7 to 15 digits)")
    }
    return number
  }
}
