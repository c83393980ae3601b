#include "FuzzDriver.h"

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

int dialtone_fuzz_run(int argc, char **argv, dialtone_fuzz_callback callback) {
  return LLVMFuzzerRunDriver(&argc, &argv, callback);
}
