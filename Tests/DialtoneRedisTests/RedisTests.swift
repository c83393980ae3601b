import DialtoneTestSupport
import Testing

/// Every test of this target, under one scratch server.
@Suite(.scratchRedis) struct RedisTests {}
