// libFuzzer harness: the checkpoint loader (see targets.h). Built and run by fuzz/run_fuzzers.sh.
#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::checkpoint_target(data, size);
}
