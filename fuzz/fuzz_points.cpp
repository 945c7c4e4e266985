// libFuzzer harness: the points CSV loader (see targets.h). Built and run by fuzz/run_fuzzers.sh.
#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::points_target(data, size);
}
