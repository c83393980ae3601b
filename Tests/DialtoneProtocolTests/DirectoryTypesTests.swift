import DialtoneProtocol
import Testing

@Suite struct DirectoryTypesTests {
  @Test func e164NumbersBecomeTheirDigitsAndAnythingElseIsRefused() {
    #expect(PhoneNumber.parse("+14155550100") == 14_155_550_100)
    #expect(PhoneNumber.parse("+1 (415) 555-0100") == 14_155_550_100)
    #expect(PhoneNumber.parse("+44.20.7946.0958") == 442_079_460_958)
    #expect(PhoneNumber.parse("+999999999999999") == 999_999_999_999_999)
    for bad in ["14155550100", "+0155550100", "+1415555010a", "+12345", "+1234567890123456", "", "+", "++1415"] {
      #expect(PhoneNumber.parse(bad) == nil, "\(bad)")
    }
    #expect(PhoneNumber.e164(14_155_550_100) == "+14155550100")
  }

  @Test func aChangeSetRoundTripsAndBadNumbersAreRefusedByPosition() throws {
    let response = DirectoryResponse(
      version: 7, full: false, identify: [DirectoryIdentification(number: 14_155_550_100, label: "Pizza")],
      block: [14_155_550_199], removedIdentify: [14_155_550_101], removedBlock: [])
    let bytes = MessageCodec.encode(response)
    #expect(try MessageCodec.decode(DirectoryResponse.self, from: bytes) == response)

    do {
      _ = try MessageCodec.decode(
        DirectoryResponse.self, from: Array(#"{"version":1,"full":true,"identify":[],"block":[14155550100,12]}"#.utf8))
      Issue.record("a seven-digit minimum was not enforced")
    } catch {
      #expect(error.message == #""block[1]" must be an integer from 1000000 to 999999999999999"#)
    }
  }
}
