// libFuzzer harness: the words loader (see targets.h). Built and run by fuzz/run_fuzzers.sh.
#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::words_target(data, size);
}
