// .npz files: a zip archive (stored members, no compression) of .npy arrays. The zip and
// .npy headers are written and parsed here, with every offset, size and CRC checked
// against the file before it is used.
//
// zip (PKWARE APPNOTE 6.3): [local header, name, data] per member, then the central
// directory (one record per member), then the end-of-central-directory record (EOCD).
// .npy (numpy NEP 1): "\x93NUMPY", major, minor, header length (u16 in 1.0, u32 in 2.0+),
// a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded
// with spaces and '\n' so the data starts on a 64-byte boundary, then the raw data.
#include <cstring>
#include <iterator>
#include <map>

#include "io/checkpoint_internal.h"
#include "tapegrad/npz.h"

namespace tg {

namespace {
using detail::get_le;
using detail::put_le;

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;  // 1980-01-01: files are reproducible
constexpr uint64_t kMaxDim = uint64_t(1) << 40;

// ---- writing ---------------------------------------------------------------------------
std::string npy_bytes(const Tensor& t) {
  std::string shape = "(";
  const Shape s = t.shape();
  for (size_t i = 0; i < s.size(); ++i) shape += (i ? ", " : "") + std::to_string(s[i]);
  if (s.size() == 1) shape += ",";
  shape += ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  const size_t unpadded = 10 + header.size() + 1;  // magic..length, dict, '\n'
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  put_le(out, header.size(), 2);
  out += header;
  const size_t n = static_cast<size_t>(t.numel());
  const size_t at = out.size();
  out.resize(at + n * 4);
  const Tensor values = t.is_contiguous() ? t : t.detach().contiguous();  // a view's own elements
  const float* src = values.data_ptr();
  if (detail::host_is_little_endian()) {
    if (n) std::memcpy(&out[at], src, n * 4);
  } else {
    for (size_t i = 0; i < n; ++i) {
      uint32_t u;
      std::memcpy(&u, src + i, 4);
      for (int b = 0; b < 4; ++b) out[at + 4 * i + b] = static_cast<char>((u >> (8 * b)) & 0xFF);
    }
  }
  return out;
}

// ---- reading ---------------------------------------------------------------------------
/// A strict little parser for the .npy header dict.
class NpyHeader {
 public:
  NpyHeader(const std::string& text, const std::string& where) : s_(text), where_(where) {}

  void parse() {
    skip();
    expect('{');
    for (;;) {
      skip();
      if (peek() == '}') break;
      const std::string key = quoted();
      skip();
      expect(':');
      skip();
      if (key == "descr") descr = quoted(), has_descr = true;
      else if (key == "fortran_order") fortran = boolean(), has_fortran = true;
      else if (key == "shape") shape = tuple(), has_shape = true;
      else fail("unknown key '" + key + "'");
      skip();
      if (peek() == ',') { ++i_; continue; }
      skip();
      if (peek() != '}') fail("expected ',' or '}'");
    }
    if (!has_descr || !has_fortran || !has_shape)
      fail("it needs 'descr', 'fortran_order' and 'shape'");
  }

  std::string descr;
  bool fortran = false;
  Shape shape;

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw CheckpointError(where_ + ": bad .npy header " + what + " in \"" + s_ + "\"");
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip() { while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t')) ++i_; }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string quoted() {
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string");
    const size_t end = s_.find(q, i_ + 1);
    if (end == std::string::npos) fail("unterminated string");
    std::string out = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    return out;
  }
  bool boolean() {
    if (s_.compare(i_, 4, "True") == 0) { i_ += 4; return true; }
    if (s_.compare(i_, 5, "False") == 0) { i_ += 5; return false; }
    fail("expected True or False");
  }
  Shape tuple() {
    expect('(');
    Shape out;
    for (;;) {
      skip();
      if (peek() == ')') { ++i_; return out; }
      if (peek() < '0' || peek() > '9') fail("expected a dimension");
      uint64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        v = v * 10 + uint64_t(peek() - '0');
        if (v > kMaxDim) fail("dimension too large");
        ++i_;
      }
      if (peek() == 'L') ++i_;  // Python 2 longs
      if (out.size() >= 64) fail("more than 64 dimensions");
      out.push_back(static_cast<int64_t>(v));
      skip();
      if (peek() == ',') ++i_;
      else if (peek() != ')') fail("expected ',' or ')' in the shape");
    }
  }

  const std::string& s_;
  std::string where_;
  size_t i_ = 0;
  bool has_descr = false, has_fortran = false, has_shape = false;
};

Tensor parse_npy(const char* p, size_t n, const std::string& where) {
  auto fail = [&](const std::string& what) { throw CheckpointError(where + ": " + what); };
  if (n < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0) fail("not a .npy array (bad magic)");
  const int major = static_cast<unsigned char>(p[6]);
  if (major < 1 || major > 3) fail(".npy format version " + std::to_string(major) + " is not supported");
  size_t start = 10;
  uint64_t hlen = get_le(p + 8, 2);
  if (major >= 2) {
    if (n < 12) fail("truncated .npy header");
    hlen = get_le(p + 8, 4);
    start = 12;
  }
  if (hlen > n - start) fail("truncated .npy header");
  const std::string text(p + start, static_cast<size_t>(hlen));
  NpyHeader h(text, where);
  h.parse();

  if (!detail::within_max_elements(h.shape)) fail("shape " + to_string(h.shape) + " has too many elements");
  const std::string& d = h.descr;
  if (d.size() != 3 || (d[0] != '<' && d[0] != '>') || d[1] != 'f' || (d[2] != '4' && d[2] != '8'))
    fail("dtype '" + d + "' is not supported (float32 or float64 only)");
  const bool little = d[0] == '<';
  const size_t item = d[2] == '4' ? 4 : 8;
  const size_t data_bytes = n - start - static_cast<size_t>(hlen);
  uint64_t numel = 1;
  for (int64_t dim : h.shape) {
    if (dim == 0) { numel = 0; break; }
    if (numel > (data_bytes / item) / uint64_t(dim) + 1) { numel = UINT64_MAX; break; }
    numel *= uint64_t(dim);
  }
  if (numel == UINT64_MAX || numel * item != data_bytes)
    fail("shape " + to_string(h.shape) + " of " + (item == 4 ? "float32" : "float64") +
         " needs " + (numel == UINT64_MAX ? std::string("more") : std::to_string(numel * item)) +
         " data bytes, the array has " + std::to_string(data_bytes));

  Tensor t = zeros(h.shape);
  float* dst = t.data_ptr();
  const char* src = p + start + hlen;
  const size_t count = static_cast<size_t>(numel);
  // Element i of the file goes to row-major position map(i).
  const size_t rank = h.shape.size();
  std::vector<int64_t> idx(rank, 0);
  std::vector<size_t> cstride(rank, 1);
  for (size_t k = rank; k-- > 1;) cstride[k - 1] = cstride[k] * static_cast<size_t>(h.shape[k]);
  const bool fast = !h.fortran && little && item == 4 && detail::host_is_little_endian();
  if (fast) {
    if (count) std::memcpy(dst, src, count * 4);
    return t;
  }
  for (size_t i = 0; i < count; ++i) {
    const char* e = src + i * item;
    uint64_t bits = 0;
    for (size_t b = 0; b < item; ++b)
      bits |= uint64_t(static_cast<unsigned char>(e[little ? b : item - 1 - b])) << (8 * b);
    float v;
    if (item == 4) {
      const uint32_t u = static_cast<uint32_t>(bits);
      std::memcpy(&v, &u, 4);
    } else {
      double dv;
      std::memcpy(&dv, &bits, 8);
      v = static_cast<float>(dv);
    }
    size_t at = i;
    if (h.fortran) {  // file order: first index fastest
      at = 0;
      for (size_t k = 0; k < rank; ++k) at += static_cast<size_t>(idx[k]) * cstride[k];
      for (size_t k = 0; k < rank; ++k) {
        if (++idx[k] < h.shape[k]) break;
        idx[k] = 0;
      }
    }
    dst[at] = v;
  }
  return t;
}
}  // namespace

void write_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& arrays) {
  auto fail = [&](const std::string& what) { throw ValueError("write_npz '" + path + "': " + what); };
  if (arrays.size() >= 0xFFFF) fail("more than 65534 arrays needs zip64, which is not supported");
  std::string out, central;
  std::map<std::string, bool> seen;
  for (const auto& [key, t] : arrays) {
    if (key.empty() || key.size() > 60000 || key.find('\0') != std::string::npos)
      fail("bad array name '" + key + "'");
    if (!seen.emplace(key, true).second) fail("array name '" + key + "' appears twice");
    if (!t.defined()) fail("array '" + key + "' is undefined");
    const std::string name = key + ".npy";
    const std::string data = npy_bytes(t);
    const uint32_t crc = crc32(data.data(), data.size());
    const uint64_t offset = out.size();
    if (offset + 30 + name.size() + data.size() >= 0xFFFFFFFFu)
      fail("archives over 4 GiB need zip64, which is not supported");
    auto common = [&](std::string& s) {  // from "version needed" to "extra length"
      put_le(s, 20, 2);                  // version needed: 2.0
      put_le(s, 0, 2);                   // flags
      put_le(s, 0, 2);                   // method: stored
      put_le(s, 0, 2);                   // time 00:00
      put_le(s, kDosDate, 2);
      put_le(s, crc, 4);
      put_le(s, data.size(), 4);         // compressed size
      put_le(s, data.size(), 4);         // uncompressed size
      put_le(s, name.size(), 2);
      put_le(s, 0, 2);                   // extra length
    };
    put_le(out, kLocalSig, 4);
    common(out);
    out += name;
    out += data;
    put_le(central, kCentralSig, 4);
    put_le(central, 20, 2);  // version made by
    common(central);
    put_le(central, 0, 2);   // comment length
    put_le(central, 0, 2);   // disk
    put_le(central, 0, 2);   // internal attributes
    put_le(central, 0, 4);   // external attributes
    put_le(central, offset, 4);
    central += name;
  }
  const uint64_t cd_offset = out.size();
  if (cd_offset + central.size() >= 0xFFFFFFFFu)
    fail("archives over 4 GiB need zip64, which is not supported");
  out += central;
  put_le(out, kEndSig, 4);
  put_le(out, 0, 2);  // this disk
  put_le(out, 0, 2);  // disk with the central directory
  put_le(out, arrays.size(), 2);
  put_le(out, arrays.size(), 2);
  put_le(out, central.size(), 4);
  put_le(out, cd_offset, 4);
  put_le(out, 0, 2);  // comment length
  detail::write_file_atomic(path, out);
}

std::vector<std::pair<std::string, Tensor>> read_npz(const std::string& path) {
  const std::string bytes = detail::read_file(path);
  const std::string source = "npz '" + path + "'";
  auto fail = [&](const std::string& what) { throw CheckpointError(source + ": " + what); };
  const char* f = bytes.data();
  const uint64_t size = bytes.size();
  if (size >= 8 && std::memcmp(f, "TAPEGRAD", 8) == 0)
    fail("this is a tapegrad checkpoint, not an npz (read it with tg::load)");
  if (size < 22) fail("truncated or not a zip archive: only " + std::to_string(size) + " bytes");

  // The EOCD is the last 22 bytes plus a comment of up to 65535 bytes.
  uint64_t eocd = UINT64_MAX;
  for (uint64_t pos = size - 22;; --pos) {
    if (get_le(f + pos, 4) == kEndSig && pos + 22 + get_le(f + pos + 20, 2) == size) {
      eocd = pos;
      break;
    }
    if (pos == 0 || size - 22 - pos >= 65535) break;
  }
  if (eocd == UINT64_MAX)
    fail("no zip end-of-central-directory record: not a zip archive, or truncated");
  const uint64_t n_disk = get_le(f + eocd + 8, 2), n_total = get_le(f + eocd + 10, 2);
  const uint64_t cd_size = get_le(f + eocd + 12, 4), cd_offset = get_le(f + eocd + 16, 4);
  if (n_total == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF)
    fail("zip64 archives (over 65534 arrays or 4 GiB) are not supported");
  if (get_le(f + eocd + 4, 2) != 0 || get_le(f + eocd + 6, 2) != 0 || n_disk != n_total)
    fail("multi-disk zip archives are not supported");
  if (cd_offset > eocd || cd_size > eocd - cd_offset)
    fail("the central directory (offset " + std::to_string(cd_offset) + ", " +
         std::to_string(cd_size) + " bytes) lies outside the file");
  const uint64_t cd_end = cd_offset + cd_size;

  std::vector<std::pair<std::string, Tensor>> out;
  std::map<std::string, bool> seen;
  // Each member's bytes, [local header, end of data), by start: members must not share
  // bytes, so the arrays together never hold more than the file (numpy refuses such files
  // too: "Overlapped entries"; a 1.5 MB file made read_npz allocate 2.4 GB).
  std::map<uint64_t, std::pair<uint64_t, std::string>> spans;
  uint64_t p = cd_offset;
  for (uint64_t i = 0; i < n_total; ++i) {
    if (cd_end - p < 46 || get_le(f + p, 4) != kCentralSig)
      fail("central directory record " + std::to_string(i) + " is damaged");
    const uint64_t flags = get_le(f + p + 8, 2), method = get_le(f + p + 10, 2);
    const uint32_t crc = static_cast<uint32_t>(get_le(f + p + 16, 4));
    uint64_t csize = get_le(f + p + 20, 4), usize = get_le(f + p + 24, 4);
    const uint64_t nlen = get_le(f + p + 28, 2), xlen = get_le(f + p + 30, 2),
                   clen = get_le(f + p + 32, 2);
    uint64_t local = get_le(f + p + 42, 4);
    if (cd_end - p - 46 < nlen + xlen + clen)
      fail("central directory record " + std::to_string(i) + " overruns the directory");
    const std::string name(f + p + 46, static_cast<size_t>(nlen));
    // zip64 extra field: the 64-bit values of whichever fields hold 0xFFFFFFFF, in order.
    for (uint64_t x = p + 46 + nlen, xend = x + xlen; xend - x >= 4;) {
      const uint64_t id = get_le(f + x, 2), len = get_le(f + x + 2, 2);
      if (len > xend - x - 4) fail("'" + name + "': damaged extra field");
      if (id == 1) {
        uint64_t q = x + 4;
        for (uint64_t* v : {&usize, &csize, &local})
          if (*v == 0xFFFFFFFF) {
            if (x + 4 + len - q < 8) fail("'" + name + "': damaged zip64 field");
            *v = get_le(f + q, 8);
            q += 8;
          }
      }
      x += 4 + len;
    }
    p += 46 + nlen + xlen + clen;

    if (flags & 1) fail("'" + name + "' is encrypted");
    if (method != 0)
      fail("'" + name + "' is compressed (zip method " + std::to_string(method) +
           "); tapegrad reads uncompressed npz only: write it with np.savez, not np.savez_compressed");
    if (csize != usize) fail("'" + name + "': stored sizes differ");
    if (local > cd_offset || cd_offset - local < 30 || get_le(f + local, 4) != kLocalSig)
      fail("'" + name + "': no local header at offset " + std::to_string(local));
    const uint64_t lnlen = get_le(f + local + 26, 2), lxlen = get_le(f + local + 28, 2);
    if (cd_offset - local - 30 < lnlen + lxlen) fail("'" + name + "': damaged local header");
    if (std::string(f + local + 30, static_cast<size_t>(lnlen)) != name)
      fail("'" + name + "': the local header names another member");
    const uint64_t data = local + 30 + lnlen + lxlen;
    if (csize > cd_offset - data)
      fail("'" + name + "': " + std::to_string(csize) + " data bytes run past the members");
    {
      const uint64_t begin = local, end = data + csize;
      auto next = spans.lower_bound(begin);
      if (next != spans.end() && next->first < end)
        fail("members '" + name + "' and '" + next->second.second + "' overlap in the file");
      if (next != spans.begin() && std::prev(next)->second.first > begin)
        fail("members '" + name + "' and '" + std::prev(next)->second.second + "' overlap in the file");
      spans.emplace(begin, std::make_pair(end, name));
    }
    const uint32_t actual = crc32(f + data, static_cast<size_t>(csize));
    if (actual != crc) fail("'" + name + "' is damaged (CRC-32 mismatch)");
    if (name.size() < 5 || name.compare(name.size() - 4, 4, ".npy") != 0)
      fail("member '" + name + "' is not a .npy array");
    const std::string key = name.substr(0, name.size() - 4);
    if (!seen.emplace(key, true).second) fail("array '" + key + "' appears twice");
    out.emplace_back(key, parse_npy(f + data, static_cast<size_t>(csize), source + " array '" + key + "'"));
  }
  return out;
}

void export_npz(const nn::Module& module, const std::string& path) {
  write_npz(path, module.named_state());
}

LoadReport import_npz(nn::Module& module, const std::string& path, const LoadOptions& options) {
  const auto arrays = read_npz(path);
  auto plan = detail::plan_load(module, arrays, options, "npz '" + path + "'");
  detail::apply_load(plan);
  return plan.report;
}

}  // namespace tg
