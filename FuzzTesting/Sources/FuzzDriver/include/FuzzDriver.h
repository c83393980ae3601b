#ifndef DIALTONE_FUZZ_DRIVER_H
#define DIALTONE_FUZZ_DRIVER_H
#include <stddef.h>
#include <stdint.h>

typedef int (*dialtone_fuzz_callback)(const uint8_t *data, size_t size);

/// Runs libFuzzer's driver with this target. SwiftPM links executables with
/// `--defsym main=<Module>_main`, so libFuzzer's own `main` is never used: each harness's
/// `<Module>_main` calls this instead.
int dialtone_fuzz_run(int argc, char **argv, dialtone_fuzz_callback callback);
#endif
