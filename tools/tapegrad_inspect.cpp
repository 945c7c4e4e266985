// tapegrad-inspect FILE...: prints a checkpoint's header, counters, metadata and every entry
// (name, shape, L2 norm), verifying both CRCs and the whole payload; also lists .npz files.
// Exit status: 0 when every file is sound, 1 when one is damaged or invalid, 2 on usage errors.
#include <algorithm>
#include <iostream>
#include <string>

#include "inspect.h"

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
    std::cerr << "usage: tapegrad-inspect FILE...   (a tapegrad checkpoint or an .npz)\n";
    return 2;
  }
  int status = 0;
  for (int i = 1; i < argc; ++i) {
    if (i > 1) std::cout << "\n";
    status = std::max(status, tg_inspect::inspect(argv[i], std::cout, std::cerr));
  }
  return status;
}
