// tapegrad-inspect's work, as a function the tool's main and the fuzz target both call
// (tools/inspect.h).
#include "inspect.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>

#include "io/checkpoint_internal.h"  // read_file: no hang on a FIFO, no endless /dev/zero
#include "tapegrad/tapegrad.h"

namespace tg_inspect {

namespace {

/// A name or value from the file as the terminal may print it: control characters (ESC
/// among them, and the C1 controls U+0080–U+009F) become \xNN, so a hostile name cannot move
/// the cursor or retitle the window. Other UTF-8 passes unchanged.
std::string printable(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const bool c1 = c == 0xC2 && i + 1 < s.size() &&
                    static_cast<unsigned char>(s[i + 1]) >= 0x80 && static_cast<unsigned char>(s[i + 1]) <= 0x9F;
    if (c < 0x20 || c == 0x7F || c == '\\' || c1) {
      const unsigned v = c1 ? static_cast<unsigned char>(s[++i]) : c;
      char buf[8];
      std::snprintf(buf, sizeof buf, c == '\\' ? "\\\\" : "\\x%02x", v);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

uint64_t le(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}
std::string hex(uint64_t v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(v));
  return buf;
}
double l2(const tg::Tensor& t) {
  double s = 0;
  for (float v : t.to_vector()) s += double(v) * v;
  return std::sqrt(s);
}
std::string pad(const std::string& s, size_t width) {
  return s + std::string(width > s.size() ? width - s.size() : 0, ' ');
}
template <class Entries>
void entries(std::ostream& out, const Entries& list) {
  size_t name_w = 0, shape_w = 0;
  for (const auto& [name, t] : list) {
    name_w = std::max(name_w, printable(name).size());
    shape_w = std::max(shape_w, tg::to_string(t.shape()).size());
  }
  for (const auto& [name, t] : list) {
    char norm[32];
    std::snprintf(norm, sizeof norm, "%.6g", l2(t));
    out << "  " << pad(printable(name), name_w) << "  " << pad(tg::to_string(t.shape()), shape_w)
              << "  norm " << norm << "\n";
  }
}

/// The raw header as the spec in tapegrad/checkpoint.h lays it out (read independently of
/// the library, so a damaged file still shows what it claims).
void print_header(std::ostream& out, const std::string& bytes) {
  out << "size:         " << bytes.size() << " bytes\n";
  if (bytes.size() < 32) return;
  out << "magic:        " << printable(bytes.substr(0, 8)) << "\n"
            << "version:      " << le(bytes, 8, 4) << "\n"
            << "flags:        " << hex(le(bytes, 12, 4), 8) << "\n"
            << "payload:      " << le(bytes, 16, 8) << " bytes\n";
  const uint32_t stored = static_cast<uint32_t>(le(bytes, 24, 4));
  const uint64_t declared = le(bytes, 16, 8);
  out << "payload crc:  " << hex(stored, 8);
  if (declared == bytes.size() - 32) {
    const uint32_t actual = tg::crc32(bytes.data() + 32, declared);
    out << (actual == stored ? " (ok)" : " (MISMATCH: the payload gives " + hex(actual, 8) + ")");
  } else {
    out << " (not checked: the file holds " << bytes.size() - 32 << " payload bytes)";
  }
  const uint32_t hstored = static_cast<uint32_t>(le(bytes, 28, 4)), hactual = tg::crc32(bytes.data(), 28);
  out << "\nheader crc:   " << hex(hstored, 8)
            << (hstored == hactual ? " (ok)" : " (MISMATCH: the header gives " + hex(hactual, 8) + ")")
            << "\n";
}

}  // namespace

int inspect(const std::string& path, std::ostream& out, std::ostream& err) {
  std::string bytes;
  try {
    bytes = tg::detail::read_file(path);  // refuses FIFOs, devices and directories
  } catch (const tg::Error& e) {
    err << "tapegrad-inspect: " << printable(e.what()) << "\n";
    return 1;
  }
  out << "file:         " << printable(path) << "\n";
  try {
    if (bytes.compare(0, 4, "PK\x03\x04") == 0) {
      out << "format:       npz (zip of .npy arrays)\n";
      const auto arrays = tg::read_npz(path);
      out << "arrays:       " << arrays.size() << "\n";
      entries(out, arrays);
      out << "ok\n";
      return 0;
    }
    print_header(out, bytes);
    const tg::Checkpoint ck = tg::Checkpoint::load(path);
    out << "step:         " << ck.step << "\n"
              << "epoch:        " << ck.epoch << "\n"
              << "rng:          " << hex(ck.rng[0], 16) << " " << hex(ck.rng[1], 16) << " "
              << hex(ck.rng[2], 16) << " " << hex(ck.rng[3], 16) << "\n"
              << "metadata:     " << ck.metadata.size() << "\n";
    for (const auto& [k, v] : ck.metadata) out << "  " << printable(k) << " = " << printable(v) << "\n";
    int64_t params = 0;
    for (const auto& [n, t] : ck.model) params += t.numel();
    out << "model:        " << ck.model.size() << " entries, " << params << " values\n";
    entries(out, ck.model);
    for (const auto& [name, s] : ck.states) {
      out << "state '" << printable(name) << "': " << s.tensors.size() << " tensors, "
                << s.numbers.size() << " numbers, " << s.strings.size() << " strings\n";
      entries(out, s.tensors);
      for (const auto& [k, v] : s.numbers) {
        char buf[40];  // the shortest form that reads back exactly
        std::snprintf(buf, sizeof buf, "%.15g", v);
        if (std::strtod(buf, nullptr) != v) std::snprintf(buf, sizeof buf, "%.17g", v);
        out << "  " << printable(k) << " = " << buf << "\n";
      }
      for (const auto& [k, v] : s.strings)
        out << "  " << printable(k) << " = \"" << printable(v) << "\"\n";
    }
    out << "ok\n";
    return 0;
  } catch (const tg::Error& e) {
    out << std::flush;
    err << "tapegrad-inspect: " << printable(e.what()) << "\n";
    return 1;
  }
}


}  // namespace tg_inspect
