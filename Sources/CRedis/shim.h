// Debian 12's hiredis is 0.14: RESP2 replies only, and no REDIS_ERR_TIMEOUT (a timed-out read is
// REDIS_ERR_IO with errno EAGAIN).
#include <hiredis/hiredis.h>
