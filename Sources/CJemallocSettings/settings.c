// jemalloc reads the global `malloc_conf` once, at its start, before main (libjemalloc defines it
// weakly; this definition, linked into the executable, takes its place). The server's settings
// ship in the binary, not in a MALLOC_CONF a deployer must remember; MALLOC_CONF, read after this
// string, still overrides it for experiments. Why these settings: docs/benchmarks.md, "jemalloc's
// settings and main's profile (item 1, branch `alloc-tune`)".
#include "jemalloc_settings.h"

const char *malloc_conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1";

const char *dialtone_jemalloc_settings(void) { return malloc_conf; }
