// libFuzzer harness: tapegrad-inspect's path (see targets.h). Built and run by
// fuzz/run_fuzzers.sh.
#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::inspect_target(data, size);
}
