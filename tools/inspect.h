#pragma once
// tapegrad-inspect's work: prints a checkpoint's header, counters, metadata and every entry
// (name, shape, L2 norm) to `out`, verifying both CRCs and the whole payload, or lists an
// .npz; errors go to `err`. Names and values from the file are printed with control
// characters escaped. Returns 0 for a sound file, 1 for a damaged, invalid or unreadable one.
#include <ostream>
#include <string>

namespace tg_inspect {

int inspect(const std::string& path, std::ostream& out, std::ostream& err);

}  // namespace tg_inspect
