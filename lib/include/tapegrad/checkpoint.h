#pragma once
// Checkpoints: a model's weights, or a whole training state, in one file.
//
//   tg::save(*model, "checkpoints/mlp.ckpt");           // weights (parameters and buffers)
//   tg::load(*model, "checkpoints/mlp.ckpt");           // strict: every key, every shape
//
// Training state (model, optimizer, scheduler, data position, counters, RNG, config):
//
//   tg::Checkpoint ck;                                  // captures the global RNG state now
//   ck.set_model(*model);
//   ck.set("optimizer", opt.state_dict());
//   ck.set("scheduler", sched.state_dict());
//   ck.step = step;  ck.epoch = epoch;
//   ck.metadata["d_model"] = "128";
//   ck.save("checkpoints/run.ckpt");                    // atomic: the old file survives a crash
//
//   auto ck = tg::Checkpoint::load("checkpoints/run.ckpt");
//   ck.restore(*model, {{"optimizer", opt}, {"scheduler", sched}});   // all or nothing
//   // or piece by piece: ck.restore_model(*model); opt.load_state_dict(ck.get("optimizer"));
//   //                    tg::default_generator().set_state(ck.rng);
//
// ---- File format, version 1 ---------------------------------------------------------
// All integers are little-endian on every host; floats are IEEE-754 binary32/binary64,
// little-endian.
//
// Header, 32 bytes:
//   offset  size  field
//        0     8  magic          the ASCII bytes "TAPEGRAD"
//        8     4  version        uint32, 1
//       12     4  flags          uint32, 0 (readers of version 1 reject anything else)
//       16     8  payload_size   uint64, bytes after the header; the file is exactly
//                                32 + payload_size bytes long
//       24     4  payload_crc    uint32, CRC-32 (IEEE 802.3, as zlib.crc32) of the payload
//       28     4  header_crc     uint32, CRC-32 of header bytes 0..27
//
// Payload: a cereal PortableBinaryOutputArchive (cereal 1.3), which is the fields below
// written back to back with no padding, little-endian:
//   payload  := byte_order:u8 (1 = little-endian, written by cereal itself)
//               step:i64  epoch:i64  rng:u64[4]   (tg::Generator state, xoshiro256**)
//               n_meta:u64    { key:str value:str } × n_meta      (sorted by key)
//               n_model:u64   { entry } × n_model                 (module order)
//               n_states:u64  { name:str state } × n_states       (sorted by name)
//   state    := n_tensors:u64 { entry } × n_tensors               (sorted by key)
//               n_numbers:u64 { key:str value:f64 } × n_numbers   (sorted by key)
//               n_strings:u64 { key:str value:str } × n_strings   (sorted by key)
//   entry    := name:str  rank:u32  dims:i64[rank]  data:f32[∏ dims]   (row-major)
//   str      := length:u64  bytes[length]                              (UTF-8)
// Model entries are keyed by the dotted PyTorch-style names of Module::named_state()
// ("blocks.0.attn.q_proj.weight"). Keys are unique within each list.
//
// Reading checks, in order: file length ≥ 32, magic, header CRC, version, flags, that the
// file is exactly 32 + payload_size bytes, the payload CRC; then every count and length
// against the bytes that remain before anything is allocated, and that the payload is used
// up exactly. Any failure is a tg::CheckpointError saying what is wrong; nothing is
// changed. Future versions bump `version`; this reader refuses versions above 1.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/arg.h"
#include "tapegrad/nn/module.h"
#include "tapegrad/random.h"
#include "tapegrad/state_dict.h"
#include "tapegrad/tensor.h"

namespace tg {

/// How a module load treats keys that do not fit.
struct LoadOptions {
  /// strict (default): any missing, unexpected or mis-shaped key throws tg::CheckpointError
  /// and nothing is loaded. Non-strict: load what fits and report the rest.
  TG_ARG(bool, strict) = true;
};

/// What a module load did. In strict mode a successful load has only `loaded`.
struct LoadReport {
  struct Mismatch {
    std::string key;
    Shape expected;  // the module's
    Shape actual;    // the file's
  };
  std::vector<std::string> loaded;
  std::vector<std::string> missing;     // in the module, not in the file
  std::vector<std::string> unexpected;  // in the file, not in the module
  std::vector<Mismatch> mismatched;     // in both, with different shapes (not loaded)

  bool ok() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
  /// One line per problem: "missing fc.bias: expected [4]", ...
  std::string to_string() const;
};

/// Writes the module's parameters and buffers (a Checkpoint with only a model).
void save(const nn::Module& module, const std::string& path);
/// Loads parameters and buffers saved by tg::save or Checkpoint::save.
LoadReport load(nn::Module& module, const std::string& path,
                const LoadOptions& options = LoadOptions());

/// Loads named tensors in memory (another module's state_dict(), or pairs of your own) into
/// the module's parameters and buffers, in place (versions bumped, as an optimizer step),
/// with the checks and messages of tg::load: strict by default (missing, unexpected or
/// mis-shaped keys throw tg::CheckpointError naming each key and both shapes, and nothing is
/// loaded); LoadOptions().strict(false) loads what fits and reports the rest.
LoadReport load_state_dict(nn::Module& module, const std::vector<std::pair<std::string, Tensor>>& state,
                           const LoadOptions& options = LoadOptions());

/// Anything with state_dict() and load_state_dict(const StateDict&): optimizers, LR
/// schedulers, data loaders. Built implicitly from such an object, which must outlive it.
class StatefulRef {
 public:
  template <class T,
            class = decltype(std::declval<T&>().load_state_dict(std::declval<const StateDict&>())),
            class = decltype(StateDict(std::declval<const T&>().state_dict()))>
  StatefulRef(T& object)  // NOLINT: implicit on purpose
      : save_([&object] { return StateDict(object.state_dict()); }),
        load_([&object](const StateDict& s) { object.load_state_dict(s); }) {}
  StateDict state_dict() const { return save_(); }
  void load_state_dict(const StateDict& s) const { load_(s); }

 private:
  std::function<StateDict()> save_;
  std::function<void(const StateDict&)> load_;
};

/// A whole training state. Plain data: set what you need, save, load, restore.
class Checkpoint {
 public:
  /// Captures the global generator's state (default_generator().state()) into `rng`.
  Checkpoint();

  int64_t step = 0;
  int64_t epoch = 0;
  Generator::State rng{};
  /// Free-form strings: the model configuration, the data set, a git hash, ...
  std::map<std::string, std::string> metadata;
  /// The model's state, by dotted name in module order (copies, not shared handles).
  std::vector<std::pair<std::string, Tensor>> model;
  /// Named states: "optimizer", "scheduler", "data", ... (deep copies).
  std::map<std::string, StateDict> states;

  /// Snapshots module.named_state() (copies of the values).
  void set_model(const nn::Module& module);
  /// Stores a deep copy of `state` under `name`, replacing any previous one.
  void set(const std::string& name, const StateDict& state);
  bool has(const std::string& name) const { return states.count(name) != 0; }
  /// The state stored under `name`; throws tg::CheckpointError listing the names there are.
  const StateDict& get(const std::string& name) const;
  /// The model tensor named `key`; throws tg::CheckpointError if there is none.
  const Tensor& model_tensor(const std::string& key) const;

  /// Writes the file atomically (path.tmp, fsync, rename); throws tg::IOError on failure,
  /// leaving any previous file at `path` intact.
  void save(const std::string& path) const;
  /// Reads and fully validates a file; throws tg::CheckpointError if it is damaged, from a
  /// newer version or not a checkpoint, tg::IOError if it cannot be opened.
  static Checkpoint load(const std::string& path);

  /// Copies the model state into `module`: validates every key and shape first, so a
  /// strict failure (tg::CheckpointError naming every offending key) changes nothing.
  LoadReport restore_model(nn::Module& module, const LoadOptions& options = LoadOptions()) const;
  /// Sets the global generator to `rng`.
  void restore_rng() const;
  /// All or nothing: validates the model (strict), loads each named state into its object
  /// (each load_state_dict validates itself; if a later one throws, the earlier objects are
  /// put back as they were), then copies the model and, if restore_rng_state, the RNG.
  void restore(nn::Module& module,
               std::initializer_list<std::pair<std::string, StatefulRef>> parts = {},
               bool restore_rng_state = true) const;

  /// The payload as the format above, and back (what save/load write and read after the
  /// header). Exposed for tools and tests.
  std::string serialize() const;
  static Checkpoint deserialize(const std::string& payload, const std::string& source = "");

 private:
  std::string state_names() const;
};

/// CRC-32 (IEEE 802.3 polynomial, reflected, as zlib.crc32 and zip), continuing from `crc`.
uint32_t crc32(const void* data, size_t size, uint32_t crc = 0);

namespace detail {
/// Test hook: the next atomic file write throws tg::IOError after `bytes` bytes of the
/// temporary file are written (one shot; negative disarms).
void fail_next_write_after(int64_t bytes);
}  // namespace detail

}  // namespace tg
