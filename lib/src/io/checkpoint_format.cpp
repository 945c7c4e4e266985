// The checkpoint payload (format version 1, specified in tapegrad/checkpoint.h) through
// cereal's portable binary archive. The only translation unit that includes cereal.
//
// Reading never trusts a count: each one is checked against the bytes left in the payload
// before anything is allocated, and cereal's own failures (short reads, bad lengths) become
// tg::CheckpointError.
#include <cereal/archives/portable_binary.hpp>

#include <istream>
#include <limits>
#include <new>
#include <set>
#include <stdexcept>

#include "io/checkpoint_internal.h"

namespace tg {
namespace detail {

namespace {
constexpr uint32_t kMaxRank = 64;
constexpr int64_t kMaxDim = int64_t(1) << 40;

using OutArchive = cereal::PortableBinaryOutputArchive;
using InArchive = cereal::PortableBinaryInputArchive;

// ---- writing ---------------------------------------------------------------------------
void put_str(OutArchive& ar, const std::string& s) {
  ar(static_cast<uint64_t>(s.size()));
  if (!s.empty()) ar(cereal::binary_data(s.data(), s.size()));
}

void put_entry(OutArchive& ar, const std::string& name, const Tensor& t) {
  if (!t.defined()) throw CheckpointError("cannot save entry '" + name + "': undefined tensor");
  put_str(ar, name);
  const Shape shape = t.shape();
  ar(static_cast<uint32_t>(shape.size()));
  for (int64_t d : shape) ar(static_cast<int64_t>(d));
  const size_t n = static_cast<size_t>(t.numel());
  // A view's own elements, in row-major order (a strided one through a copy).
  const Tensor values = t.is_contiguous() ? t : t.detach().contiguous();
  if (n) ar(cereal::binary_data(values.data_ptr(), n * sizeof(float)));  // swapped per float on BE
}

template <class Map, class Put>
void put_map(OutArchive& ar, const Map& m, Put put_value) {
  ar(static_cast<uint64_t>(m.size()));
  for (const auto& [k, v] : m) {
    put_str(ar, k);
    put_value(v);
  }
}

/// An output stream buffer that appends to a string.
class StringSink : public std::streambuf {
 public:
  explicit StringSink(std::string& out) : out_(out) {}

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    out_.append(s, static_cast<size_t>(n));
    return n;
  }
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof())) out_.push_back(traits_type::to_char_type(c));
    return traits_type::not_eof(c);
  }

 private:
  std::string& out_;
};

// ---- reading ---------------------------------------------------------------------------
/// A read-only stream over memory that knows how much is left.
class MemBuf : public std::streambuf {
 public:
  MemBuf(const char* data, size_t size) {
    char* p = const_cast<char*>(data);  // the get area is never written through
    setg(p, p, p + size);
  }
  size_t remaining() const { return static_cast<size_t>(egptr() - gptr()); }
};

class Reader {
 public:
  Reader(const char* data, size_t size, const std::string& source)
      : buf_(data, size), is_(&buf_), ar_(is_), source_(source) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw CheckpointError(source_ + ": damaged payload: " + what);
  }
  size_t remaining() const { return buf_.remaining(); }

  template <class T>
  T get() {
    T v{};
    ar_(v);
    return v;
  }
  /// A count of items, each at least `min_bytes` long, bounded by what is left.
  uint64_t count(size_t min_bytes, const std::string& what) {
    const uint64_t n = get<uint64_t>();
    if (n > remaining() / min_bytes)
      fail(what + " count " + std::to_string(n) + " cannot fit in the " +
           std::to_string(remaining()) + " bytes left");
    return n;
  }
  std::string str(const char* what) {
    const uint64_t n = get<uint64_t>();
    if (n > remaining())
      fail(std::string(what) + " length " + std::to_string(n) + " exceeds the " +
           std::to_string(remaining()) + " bytes left");
    std::string s(static_cast<size_t>(n), '\0');
    if (n) ar_(cereal::binary_data(&s[0], s.size()));
    return s;
  }
  std::pair<std::string, Tensor> entry() {
    std::string name = str("entry name");
    const uint32_t rank = get<uint32_t>();
    if (rank > kMaxRank) fail("entry '" + name + "' has rank " + std::to_string(rank));
    if (size_t(rank) * 8 > remaining()) fail("entry '" + name + "' is cut short in its shape");
    Shape shape(rank);
    const uint64_t max_numel = remaining() / sizeof(float);
    uint64_t numel = 1;
    for (auto& d : shape) {
      d = get<int64_t>();
      if (d < 0 || d > kMaxDim)
        fail("entry '" + name + "' has dimension " + std::to_string(d));
    }
    if (!within_max_elements(shape))  // found by fuzzing: [0, 2^39, 2^39] overflowed the strides
      fail("entry '" + name + "' of shape " + to_string(shape) + " has too many elements");
    for (int64_t d : shape) {
      if (d == 0) { numel = 0; break; }
      if (numel > max_numel / uint64_t(d))
        fail("entry '" + name + "' of shape " + to_string(shape) + " does not fit in the " +
             std::to_string(remaining()) + " bytes left");
      numel *= uint64_t(d);
    }
    if (numel * sizeof(float) > remaining())
      fail("entry '" + name + "' of shape " + to_string(shape) + " does not fit in the " +
           std::to_string(remaining()) + " bytes left");
    Tensor t = zeros(shape);
    if (numel) ar_(cereal::binary_data(t.data_ptr(), size_t(numel) * sizeof(float)));
    return {std::move(name), std::move(t)};
  }
  std::map<std::string, Tensor> entry_map(const std::string& what) {
    std::map<std::string, Tensor> out;
    const uint64_t n = count(12, what);
    for (uint64_t i = 0; i < n; ++i) {
      auto e = entry();
      if (out.count(e.first)) fail(what + " key '" + e.first + "' appears twice");
      out.emplace(std::move(e));
    }
    return out;
  }
  template <class Value, class GetValue>
  std::map<std::string, Value> value_map(size_t min_value_bytes, const std::string& what,
                                         GetValue get_value) {
    std::map<std::string, Value> out;
    const uint64_t n = count(8 + min_value_bytes, what);
    for (uint64_t i = 0; i < n; ++i) {
      std::string k = str("key");
      if (out.count(k)) fail(what + " key '" + k + "' appears twice");
      out.emplace(std::move(k), get_value());
    }
    return out;
  }

 private:
  MemBuf buf_;
  std::istream is_;
  InArchive ar_;
  std::string source_;
};

Checkpoint decode(Reader& r) {
  Checkpoint ck;
  ck.step = r.get<int64_t>();
  ck.epoch = r.get<int64_t>();
  for (auto& w : ck.rng) w = r.get<uint64_t>();
  ck.metadata = r.value_map<std::string>(8, "metadata", [&] { return r.str("metadata value"); });
  const uint64_t n_model = r.count(12, "model entry");
  std::set<std::string> model_keys;  // a scan per entry made many-entry files quadratic
  for (uint64_t i = 0; i < n_model; ++i) {
    auto e = r.entry();
    if (!model_keys.insert(e.first).second) r.fail("model key '" + e.first + "' appears twice");
    ck.model.push_back(std::move(e));
  }
  const uint64_t n_states = r.count(8 + 24, "state");
  for (uint64_t i = 0; i < n_states; ++i) {
    std::string name = r.str("state name");
    if (ck.states.count(name)) r.fail("state '" + name + "' appears twice");
    StateDict s;
    s.tensors = r.entry_map("state '" + name + "' tensor");
    s.numbers = r.value_map<double>(8, "state '" + name + "' number", [&] { return r.get<double>(); });
    s.strings = r.value_map<std::string>(8, "state '" + name + "' string",
                                         [&] { return r.str("string value"); });
    ck.states.emplace(std::move(name), std::move(s));
  }
  if (r.remaining() != 0)
    r.fail(std::to_string(r.remaining()) + " unused bytes after the last state");
  return ck;
}
}  // namespace

void encode_payload(const Checkpoint& ck, std::string& out) {
  // Reserve the final size up front: one allocation, no copies of the tensor data.
  size_t estimate = 256;
  auto add = [&](const std::string& name, const Tensor& t) {
    estimate += 32 + name.size() + 8 * static_cast<size_t>(t.dim()) + 4 * static_cast<size_t>(t.numel());
  };
  for (const auto& [name, t] : ck.model) add(name, t);
  for (const auto& [name, s] : ck.states)
    for (const auto& [k, t] : s.tensors) add(k, t);
  out.reserve(out.size() + estimate);
  StringSink sink(out);
  std::ostream os(&sink);
  {
    OutArchive ar(os, OutArchive::Options::LittleEndian());
    ar(static_cast<int64_t>(ck.step), static_cast<int64_t>(ck.epoch));
    for (uint64_t w : ck.rng) ar(w);
    put_map(ar, ck.metadata, [&](const std::string& v) { put_str(ar, v); });
    ar(static_cast<uint64_t>(ck.model.size()));
    for (const auto& [name, t] : ck.model) put_entry(ar, name, t);
    ar(static_cast<uint64_t>(ck.states.size()));
    for (const auto& [name, s] : ck.states) {
      put_str(ar, name);
      ar(static_cast<uint64_t>(s.tensors.size()));
      for (const auto& [k, t] : s.tensors) put_entry(ar, k, t);
      put_map(ar, s.numbers, [&](double v) { ar(v); });
      put_map(ar, s.strings, [&](const std::string& v) { put_str(ar, v); });
    }
  }
}

Checkpoint decode_payload(const char* data, size_t size, const std::string& source) {
  if (size == 0) throw CheckpointError(source + ": damaged payload: it is empty");
  if (static_cast<unsigned char>(data[0]) != 1)
    throw CheckpointError(source + ": damaged payload: byte-order flag is " +
                          std::to_string(static_cast<unsigned char>(data[0])) +
                          ", expected 1 (little-endian)");
  try {
    Reader r(data, size, source);
    return decode(r);
  } catch (const cereal::Exception& e) {
    throw CheckpointError(source + ": damaged payload: " + e.what());
  } catch (const std::length_error& e) {
    throw CheckpointError(source + ": damaged payload: bad length (" + e.what() + ")");
  } catch (const std::bad_alloc&) {
    throw CheckpointError(source + ": damaged payload: a declared size is too large");
  }
}

}  // namespace detail
}  // namespace tg
