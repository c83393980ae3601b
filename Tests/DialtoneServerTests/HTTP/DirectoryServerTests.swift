import DialtoneJSON
import DialtoneNet
import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer

private let backendToken = "backend-token-0123456789"

/// `/v1/directory`: the backend uploads whole lists, each device fetches them whole or as the
/// changes since its version.
@Suite(.serialized) struct DirectoryServerTests {
  private func upload(_ server: TestServer, _ user: String, _ body: String, token: String? = backendToken)
    async throws -> (status: Int, json: JSONValue?)
  {
    try await server.http("PUT", "/v1/directory/\(user)", token: token, body: body)
  }

  private func fetch(_ server: TestServer, _ user: String, since: Int64? = nil) async throws -> DirectoryResponse {
    let path = "/v1/directory" + (since.map { "?since=\($0)" } ?? "")
    let answer = try await server.http("GET", path, token: server.token(user))
    #expect(answer.status == 200)
    let json = try #require(answer.json)
    return try MessageCodec.decode(DirectoryResponse.self, from: json.serialized)
  }

  @Test func uploadsAreTheBackendsAndDevicesGetSnapshotsOrChanges() async throws {
    let off = try await TestServer()
    #expect(try await upload(off, "bob", #"{"identify":[],"block":[]}"#).status == 404)
    await off.stop()

    let server = try await TestServer { $0.directoryToken = backendToken }
    // Over a raw socket: URLSession on Linux never completes a 401 with a Basic challenge.
    let port = server.server.port
    let userToken = server.token("bob")
    let refusals = try await blockingIO {
      try ["Authorization: Bearer \(userToken)\r\n", ""].map { credential in
        let connection = try RawHTTPConnection(port: port)
        connection.send(
          "PUT /v1/directory/bob HTTP/1.1\r\nHost: x\r\n\(credential)Content-Length: 2\r\n\r\n{}")
        return connection.readResponse()?.status
      }
    }
    #expect(refusals == [401, 401])

    let first = try await upload(
      server, "bob",
      #"{"identify":[{"number":"+1 415 555 0101","label":"Pizza"},{"number":"+14155550100","label":"Dentist"}],"block":["+14155550199"]}"#
    )
    #expect(first.status == 200 && first.json?["version"]?.intValue == 1)
    let whole = try await fetch(server, "bob")
    #expect(whole.full && whole.version == 1)
    #expect(
      whole.identify == [
        DirectoryIdentification(number: 14_155_550_100, label: "Dentist"),
        DirectoryIdentification(number: 14_155_550_101, label: "Pizza"),
      ])
    #expect(whole.block == [14_155_550_199])
    #expect(try await fetch(server, "alice") == DirectoryResponse(version: 0, full: true))

    let second =
      #"{"identify":[{"number":"+14155550100","label":"Dr. Who"},{"number":"+14155550102","label":"Taxi"}],"block":["+14155550198"]}"#
    #expect(try await upload(server, "bob", second).json?["version"]?.intValue == 2)
    #expect(try await upload(server, "bob", second).json?["version"]?.intValue == 2)
    let changes = try await fetch(server, "bob", since: 1)
    #expect(!changes.full && changes.version == 2)
    #expect(
      changes.identify == [
        DirectoryIdentification(number: 14_155_550_100, label: "Dr. Who"),
        DirectoryIdentification(number: 14_155_550_102, label: "Taxi"),
      ])
    #expect(changes.removedIdentify == [14_155_550_101])
    #expect(changes.block == [14_155_550_198] && changes.removedBlock == [14_155_550_199])
    #expect(try await fetch(server, "bob", since: 2) == DirectoryResponse(version: 2, full: false))
    #expect(try await fetch(server, "bob", since: 7).full)
    #expect(try await server.http("GET", "/v1/directory?since=-1", token: server.token("bob")).status == 400)
    await server.stop()
  }

  @Test func aDeviceTooFarBehindGetsEverythingAndAddedThenRemovedIsNoChange() async throws {
    let server = try await TestServer { $0.directoryToken = backendToken }
    for n in 0..<(DirectoryLimits.changeHistoryVersions + 2) {
      _ = try await upload(server, "bob", #"{"identify":[],"block":["+1415555\#(1000 + n)"]}"#)
    }
    #expect(try await fetch(server, "bob", since: 1).full)
    let recent = try await fetch(server, "bob", since: DirectoryLimits.changeHistoryVersions)
    #expect(!recent.full)
    #expect(recent.block == [14_155_551_000 + DirectoryLimits.changeHistoryVersions + 1])
    // Added after version 32, removed again by the last upload: nothing for the device to do.
    #expect(!recent.removedBlock.contains(14_155_551_000 + DirectoryLimits.changeHistoryVersions))
    #expect(recent.removedBlock == [14_155_551_000 + DirectoryLimits.changeHistoryVersions - 1])
    await server.stop()
  }

  @Test func badEntriesAreRefusedByName() async throws {
    let server = try await TestServer { $0.directoryToken = backendToken }
    let cases: [(String, String)] = [
      (#"{"identify":[],"block":["+14155550100","14155550101"]}"#, #"block[1] "14155550101" is not an E.164 number"#),
      (#"{"identify":[{"number":"+0155","label":"x"}],"block":[]}"#, #"identify[0].number "+0155" is not"#),
      (#"{"identify":[{"number":"+14155550100","label":""}],"block":[]}"#, "identify[0].label must be 1 to 128"),
      (
        #"{"identify":[{"number":"+14155550100","label":"a"},{"number":"+1 415 555 0100","label":"b"}],"block":[]}"#,
        "identify[1].number repeats identify[0].number"
      ),
      (#"{"identify":[],"block":["+14155550100","+14155550100"]}"#, "block[1] repeats block[0]"),
      (#"{"identify":{},"block":[]}"#, #""identify" must be an array"#),
    ]
    for (body, problem) in cases {
      let answer = try await upload(server, "bob", body)
      #expect(answer.status == 400, "\(body)")
      #expect(answer.json?["error"]?["message"]?.stringValue?.hasPrefix(problem) == true, "\(body)")
    }
    #expect(try await fetch(server, "bob") == DirectoryResponse(version: 0, full: true))

    let tooMany = DirectoryUpload(
      block: (0...DirectoryLimits.maxBlockedNumbers).map { "+1415\(5_000_000 + $0)" })
    #expect(throws: HTTPError.self) { try DirectoryRoutes.validate(tooMany) }
    await server.stop()
  }
}
