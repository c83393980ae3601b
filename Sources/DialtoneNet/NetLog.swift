/// How DialtoneNet reports what an operator should see (descriptor exhaustion); the server routes it
/// into its own log. DialtoneNet has no logger of its own, so the default drops everything.
public enum NetLogLevel: Sendable {
  case info, warning
}

public typealias NetLogger = @Sendable (NetLogLevel, String) -> Void
