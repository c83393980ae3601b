// `JSONValue` is part of this module's API (`WireCodable.init(json:)`, `json` properties),
// so clients that import DialtoneProtocol see it without importing DialtoneJSON themselves.
@_exported import DialtoneJSON
