import Foundation

extension Date {
  /// The wire's timestamps: integer milliseconds since the Unix epoch.
  public var millisecondsSince1970: Int64 { Int64((timeIntervalSince1970 * 1000).rounded()) }
}

extension Date {
  public init(milliseconds: Int64) { self.init(timeIntervalSince1970: Double(milliseconds) / 1000) }
}
