// tg::Checkpoint, tg::save / tg::load: the 32-byte header (see tapegrad/checkpoint.h),
// validated loads, and all-or-nothing restores. The payload codec is checkpoint_format.cpp.
#include <cstdio>
#include <cstring>

#include "io/checkpoint_internal.h"

namespace tg {

namespace {
constexpr char kMagic[8] = {'T', 'A', 'P', 'E', 'G', 'R', 'A', 'D'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderSize = 32;

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

std::string printable(const char* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(p[i]);
    if (c >= 32 && c < 127) s.push_back(static_cast<char>(c));
    else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      s += buf;
    }
  }
  return s;
}

StateDict deep_copy(const StateDict& s) {
  StateDict out = s;
  for (auto& [k, t] : out.tensors)
    if (t.defined()) t = t.clone();
  return out;
}

/// Checks the header of a whole file and returns the payload's offset and size.
std::pair<size_t, size_t> check_header(const std::string& bytes, const std::string& source) {
  auto fail = [&](const std::string& what) { throw CheckpointError(source + ": " + what); };
  if (bytes.size() < 8 || std::memcmp(bytes.data(), kMagic, 8) != 0) {
    const size_t n = std::min<size_t>(bytes.size(), 8);
    if (n >= 4 && std::memcmp(bytes.data(), "PK\x03\x04", 4) == 0)
      fail("this is a zip/.npz file, not a tapegrad checkpoint (read it with tg::import_npz)");
    if (bytes.size() < 8 && std::memcmp(bytes.data(), kMagic, bytes.size()) == 0)
      fail("truncated: the file has " + std::to_string(bytes.size()) +
           " bytes, the header alone needs 32");
    fail("not a tapegrad checkpoint: the file starts with '" + printable(bytes.data(), n) +
         "', expected 'TAPEGRAD'");
  }
  if (bytes.size() < kHeaderSize)
    fail("truncated: the file has " + std::to_string(bytes.size()) +
         " bytes, the header alone needs 32");
  const char* h = bytes.data();
  const uint32_t version = static_cast<uint32_t>(detail::get_le(h + 8, 4));
  const uint32_t flags = static_cast<uint32_t>(detail::get_le(h + 12, 4));
  const uint64_t payload_size = detail::get_le(h + 16, 8);
  const uint32_t payload_crc = static_cast<uint32_t>(detail::get_le(h + 24, 4));
  const uint32_t header_crc = static_cast<uint32_t>(detail::get_le(h + 28, 4));
  const uint32_t header_actual = crc32(h, 28);
  if (header_crc != header_actual)
    fail("damaged header: its CRC-32 is " + hex32(header_actual) + ", the header says " +
         hex32(header_crc));
  if (version == 0 || version > kVersion)
    fail("format version " + std::to_string(version) +
         (version > kVersion ? " was written by a newer tapegrad" : " is invalid") +
         "; this build reads version " + std::to_string(kVersion));
  if (flags != 0) fail("unknown header flags " + hex32(flags) + " for format version 1");
  const uint64_t have = bytes.size() - kHeaderSize;
  if (payload_size > have)
    fail("truncated: the header declares a " + std::to_string(payload_size) +
         "-byte payload, the file holds " + std::to_string(have));
  if (payload_size < have)
    fail(std::to_string(have - payload_size) + " unexpected bytes after the " +
         std::to_string(payload_size) + "-byte payload");
  const uint32_t actual = crc32(h + kHeaderSize, payload_size);
  if (actual != payload_crc)
    fail("the payload is damaged: its CRC-32 is " + hex32(actual) + ", the header says " +
         hex32(payload_crc));
  return {kHeaderSize, static_cast<size_t>(payload_size)};
}

/// The whole file: the header, then the payload.
std::string file_bytes(const Checkpoint& ck) {
  std::string out(kHeaderSize, '\0');
  detail::encode_payload(ck, out);
  const size_t payload = out.size() - kHeaderSize;
  std::string h(kMagic, 8);
  detail::put_le(h, kVersion, 4);
  detail::put_le(h, 0, 4);
  detail::put_le(h, payload, 8);
  detail::put_le(h, crc32(out.data() + kHeaderSize, payload), 4);
  detail::put_le(h, crc32(h.data(), 28), 4);
  out.replace(0, kHeaderSize, h);
  return out;
}
}  // namespace

std::string LoadReport::to_string() const {
  std::string s;
  for (const auto& k : missing) s += "missing " + k + "\n";
  for (const auto& k : unexpected) s += "unexpected " + k + "\n";
  for (const auto& m : mismatched)
    s += "shape " + m.key + ": expected " + tg::to_string(m.expected) + ", got " +
         tg::to_string(m.actual) + "\n";
  return s;
}

Checkpoint::Checkpoint() : rng(default_generator().state()) {}

void Checkpoint::set_model(const nn::Module& module) {
  model.clear();
  for (const auto& [name, t] : module.named_state()) model.emplace_back(name, t.clone());
}

void Checkpoint::set(const std::string& name, const StateDict& state) {
  states[name] = deep_copy(state);
}

std::string Checkpoint::state_names() const {
  std::string have;
  for (const auto& [k, s] : states) have += (have.empty() ? "'" : ", '") + k + "'";
  return have.empty() ? "none" : have;
}

const StateDict& Checkpoint::get(const std::string& name) const {
  auto it = states.find(name);
  if (it == states.end())
    throw CheckpointError("checkpoint has no state '" + name + "' (it has " + state_names() + ")");
  return it->second;
}

const Tensor& Checkpoint::model_tensor(const std::string& key) const {
  for (const auto& [k, t] : model)
    if (k == key) return t;
  throw CheckpointError("checkpoint has no model entry '" + key + "'");
}

std::string Checkpoint::serialize() const {
  std::string out;
  detail::encode_payload(*this, out);
  return out;
}

Checkpoint Checkpoint::deserialize(const std::string& payload, const std::string& source) {
  return detail::decode_payload(payload.data(), payload.size(),
                                source.empty() ? "checkpoint payload" : source);
}

void Checkpoint::save(const std::string& path) const {
  detail::write_file_atomic(path, file_bytes(*this));
}

Checkpoint Checkpoint::load(const std::string& path) {
  const std::string bytes = detail::read_file(path);
  const std::string source = "checkpoint '" + path + "'";
  const auto [offset, size] = check_header(bytes, source);
  return detail::decode_payload(bytes.data() + offset, size, source);
}

LoadReport Checkpoint::restore_model(nn::Module& module, const LoadOptions& options) const {
  auto plan = detail::plan_load(module, model, options, "checkpoint");
  detail::apply_load(plan);
  return plan.report;
}

void Checkpoint::restore_rng() const { default_generator().set_state(rng); }

void Checkpoint::restore(nn::Module& module,
                         std::initializer_list<std::pair<std::string, StatefulRef>> parts,
                         bool restore_rng_state) const {
  const auto plan = detail::plan_load(module, model, LoadOptions(), "checkpoint");
  std::string absent;
  for (const auto& [name, obj] : parts)
    if (!has(name)) absent += (absent.empty() ? "'" : ", '") + name + "'";
  if (!absent.empty())
    throw CheckpointError("checkpoint has no state " + absent + " (it has " + state_names() +
                          "); nothing was restored");
  std::vector<StateDict> before;
  size_t loaded = 0;
  try {
    for (const auto& [name, obj] : parts) {
      before.push_back(deep_copy(obj.state_dict()));
      obj.load_state_dict(get(name));
      ++loaded;
    }
  } catch (...) {
    // Put back every object loaded so far (the one that threw left itself unchanged).
    auto it = parts.begin();
    for (size_t i = 0; i < loaded; ++i, ++it) it->second.load_state_dict(before[i]);
    throw;
  }
  detail::apply_load(plan);
  if (restore_rng_state) restore_rng();
}

void save(const nn::Module& module, const std::string& path) {
  Checkpoint ck;
  ck.model = module.named_state();  // written at once: no snapshot copy needed
  ck.save(path);
}

LoadReport load_state_dict(nn::Module& module, const std::vector<std::pair<std::string, Tensor>>& state,
                           const LoadOptions& options) {
  detail::NamedTensors dense;  // apply_load reads each source as one dense block
  for (const auto& [name, t] : state)
    dense.emplace_back(name, t.defined() && !t.is_contiguous() ? t.contiguous().detach() : t);
  auto plan = detail::plan_load(module, dense, options, "load_state_dict", "the state dict");
  detail::apply_load(plan);
  return plan.report;
}

LoadReport load(nn::Module& module, const std::string& path, const LoadOptions& options) {
  const Checkpoint ck = Checkpoint::load(path);
  auto plan = detail::plan_load(module, ck.model, options, "checkpoint '" + path + "'");
  detail::apply_load(plan);
  return plan.report;
}

}  // namespace tg
