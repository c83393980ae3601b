import DialtoneJSON
import Foundation
import Testing

@Suite("JSON values")
struct JSONValueTests {
  @Test func parsesEachKindDistinctly() throws {
    let value = try #require(
      JSONValue(parsing: utf8(#"{"t":true,"i":1,"d":1.5,"s":"x","n":null,"a":[1,"y"],"o":{"k":false}}"#)))
    #expect(value["t"] == .bool(true))
    #expect(value["i"] == .int(1))
    #expect(value["d"] == .double(1.5))
    #expect(value["s"] == .string("x"))
    #expect(value["n"] == .null)
    #expect(value["a"] == [1, "y"])
    #expect(value["o"] == ["k": false])
    #expect(value["missing"] == nil)
    #expect(value["a"]?["k"] == nil)
    #expect(value["t"]?.intValue == nil)
    #expect(value["i"]?.boolValue == nil)
  }

  @Test func typeNames() {
    let values: [JSONValue] = [.null, true, 1, 1.5, "s", [], [:]]
    #expect(values.map(\.typeName) == ["null", "boolean", "number", "number", "string", "array", "object"])
  }

  @Test func scalarAccessors() {
    #expect(JSONValue.bool(true).boolValue == true)
    #expect(JSONValue.int(1).boolValue == nil)
    #expect(JSONValue.string("s").stringValue == "s")
    #expect(JSONValue.null.stringValue == nil)
    #expect(JSONValue.array([1]).arrayValue == [1])
    #expect(JSONValue.object([:]).arrayValue == nil)
    #expect(JSONValue.object(["a": 1]).objectValue == ["a": 1])
    #expect(JSONValue.array([]).objectValue == nil)
    #expect(JSONValue.int(3).doubleValue == 3)
    #expect(JSONValue.double(2.5).doubleValue == 2.5)
    #expect(JSONValue.string("2.5").doubleValue == nil)
  }

  @Test func integerAccessorsAcceptIntegralDoubles() {
    #expect(JSONValue.int(Int64.min).integerValue == Int64.min)
    #expect(JSONValue.double(3.0).integerValue == 3)
    #expect(JSONValue.double(-0.0).integerValue == 0)
    #expect(JSONValue.double(3.5).integerValue == nil)
    #expect(JSONValue.double(1e300).integerValue == nil)
    #expect(JSONValue.double(9_223_372_036_854_775_808).integerValue == nil)
    #expect(JSONValue.double(-9_223_372_036_854_775_808).integerValue == Int64.min)
    #expect(JSONValue.double(.nan).integerValue == nil)
    #expect(JSONValue.double(.infinity).integerValue == nil)
    #expect(JSONValue.string("3").integerValue == nil)
    #expect(JSONValue.bool(true).integerValue == nil)
    #expect(JSONValue.int(7).intValue == 7)
    #expect(JSONValue.double(5.0).intValue == 5)
    #expect(JSONValue.double(5.5).intValue == nil)
    #expect(JSONValue.double(1e300).intValue == nil)
  }

  @Test func literals() {
    let value: JSONValue = ["b": true, "i": -3, "d": 0.25, "s": "x", "a": [1, "two", .null], "o": [:]]
    #expect(
      value
        == .object([
          "b": .bool(true), "i": .int(-3), "d": .double(0.25), "s": .string("x"),
          "a": .array([.int(1), .string("two"), .null]), "o": .object([:]),
        ]))
    // A nil in a `JSONValue?` context stays nil rather than becoming `.null`.
    func pick(_ flag: Bool) -> JSONValue? { flag ? "yes" : nil }
    #expect(pick(false) == nil)
    #expect(pick(true) == "yes")
  }

  @Test func codableRoundTripThroughFoundation() throws {
    let value: JSONValue = [
      "s": "x/y é", "i": 9_007_199_254_740_993, "d": 0.5, "b": false, "n": .null, "a": [1, [true]],
    ]
    let data = try JSONEncoder().encode(value)
    #expect(try JSONValue.parse(data) == value)
    #expect(try JSONDecoder().decode(JSONValue.self, from: data) == value)
    #expect(try JSONDecoder().decode(JSONValue.self, from: Data("[true,1,1.5,null]".utf8)) == [true, 1, 1.5, .null])
  }

  @Test func valuesAreSendable() async {
    let value: JSONValue = ["k": [1, 2, 3]]
    let copy = await Task.detached { value }.value
    #expect(copy == value)
  }
}
