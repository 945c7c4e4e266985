#pragma once
// Shared by the checkpoint and npz translation units: little-endian byte coding, whole-file
// reads, atomic writes, and the validate-then-apply load of a module's state.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/shape.h"
#include "tapegrad/checkpoint.h"

namespace tg {
namespace detail {

// ---- little-endian integers, whatever the host ---------------------------------------
inline void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
inline uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
inline bool host_is_little_endian() {
  const uint16_t one = 1;
  return *reinterpret_cast<const unsigned char*>(&one) == 1;
}

/// The whole file; tg::IOError naming `path` if it cannot be opened or read.
std::string read_file(const std::string& path);
/// Writes a temporary file of this save's own in the same folder (PATH.tmp-<boot>-<pid>-<n>,
/// created with O_EXCL), fsyncs and closes it, renames it over `path` and fsyncs the folder.
/// On any failure the temporary file is removed, `path` is left as it was, and tg::IOError is
/// thrown. A `path` that exists and is not a regular file (a FIFO, a device, a directory, a
/// symbolic link) is refused, never replaced. Temporaries left by a process that died
/// mid-save (same boot, process gone) are removed first.
void write_file_atomic(const std::string& path, const std::string& bytes);

// ---- loading a module's state ----------------------------------------------------------
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// What a load will copy (destination, source), and the report.
struct LoadPlan {
  LoadReport report;
  std::vector<std::pair<Tensor, Tensor>> copies;
};
/// Matches `entries` against module.named_state(). Strict: any problem throws
/// tg::CheckpointError that names `source` and every offending key with both shapes;
/// `container` is what the messages call the entries' holder ("the file").
LoadPlan plan_load(const nn::Module& module, const NamedTensors& entries,
                   const LoadOptions& options, const std::string& source,
                   const std::string& container = "the file");
/// Copies the planned values; cannot fail.
void apply_load(const LoadPlan& plan) noexcept;

/// The payload codec (checkpoint_format.cpp, the only file that includes cereal).
/// Appends the payload to `out`.
void encode_payload(const Checkpoint& ck, std::string& out);
Checkpoint decode_payload(const char* data, size_t size, const std::string& source);

}  // namespace detail
}  // namespace tg
