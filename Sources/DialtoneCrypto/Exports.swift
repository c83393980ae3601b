// `JSONValue` is part of this module's API (`JWTClaims.object`, `JWTClaims.json`), so
// clients that import DialtoneCrypto see it without importing DialtoneJSON themselves.
@_exported import DialtoneJSON
