#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#endif

/// Whether a host is written as an IP address (IPv4 dotted or IPv6, without brackets) rather
/// than a name: such a host is not looked up in DNS, and a TLS peer's certificate is checked
/// against it as an IP address, not a DNS name.
public enum IPAddressLiteral {
  public static func matches(_ host: String) -> Bool {
    var v4 = in_addr()
    var v6 = in6_addr()
    return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
  }
}
