/// Commands in Redis's wire form, written by Swift into one buffer for a whole pipeline: for
/// each command `*<argument count>\r\n`, then for each argument `$<length>\r\n<bytes>\r\n` (any
/// byte, CRLF included, stays part of the value). The same bytes hiredis's
/// `redisFormatCommandArgv` writes, without the argv and length arrays built to call it and its
/// `sdscatfmt` per argument: on a cluster node those were most of the Redis client's own cost per
/// relayed message (docs/benchmarks.md, "Item 4, tenth step").
enum RedisCommandFormat {
  /// The commands, in order, in one buffer.
  static func encode(_ commands: [[RedisArgument]]) -> [UInt8] {
    var capacity = 0
    for arguments in commands {
      capacity += 16
      for argument in arguments { capacity += argument.bytes.count + 16 }
    }
    var buffer: [UInt8] = []
    buffer.reserveCapacity(capacity)
    for arguments in commands {
      header(UInt8(ascii: "*"), arguments.count, &buffer)
      for argument in arguments {
        header(UInt8(ascii: "$"), argument.bytes.count, &buffer)
        buffer.append(contentsOf: argument.bytes)
        buffer.append(13)
        buffer.append(10)
      }
    }
    return buffer
  }

  /// `kind`, `count` in decimal digits (never negative: a count or a length), CRLF.
  private static func header(_ kind: UInt8, _ count: Int, _ buffer: inout [UInt8]) {
    buffer.append(kind)
    var divisor = 1
    while count / divisor >= 10 { divisor *= 10 }
    var rest = count
    while divisor > 0 {
      buffer.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest / divisor))
      rest %= divisor
      divisor /= 10
    }
    buffer.append(13)
    buffer.append(10)
  }
}
