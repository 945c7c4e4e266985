// Writes the seed corpus: fuzz/corpus/{checkpoint,npz,words,points}/seed-* (small, valid inputs
// that reach deep into each loader). Run by fuzz/run_fuzzers.sh --seeds; the output is
// committed.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "targets.h"

namespace fs = std::filesystem;

namespace {

void put(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The first `n` lines of a file.
std::string head(const fs::path& p, int n) {
  std::ifstream in(p);
  std::string line, out;
  for (int i = 0; i < n && std::getline(in, line); ++i) out += line + "\n";
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: make_fuzz_seeds <source dir> <corpus dir>\n";
    return 2;
  }
  const fs::path src = argv[1], out = argv[2];
  tg::manual_seed(1);

  // ---- checkpoints: a weights-only file, and a full training state ------------------------
  fuzz::Net net;
  tg::optim::Adam adam(net.parameters());
  for (auto& p : net.parameters()) p.set_grad(tg::ones_like(p));
  adam.step();
  tg::optim::WarmupCosineLR sched(adam, 2, 10);
  sched.step();
  tg::data::DataLoader<tg::data::TensorDataset> loader(
      tg::data::TensorDataset({tg::zeros({10, 2})}), tg::data::DataLoaderOptions(3).shuffle(true).seed(1));
  loader.begin();
  tg::Checkpoint full;
  full.set_model(net);
  full.set("optimizer", adam.state_dict());
  full.set("scheduler", sched.state_dict());
  full.set("data", loader.state_dict());
  full.step = 7;
  full.metadata["note"] = "seed";
  tg::Checkpoint weights;
  weights.set_model(net);
  const fs::path ck = out / "checkpoint";
  put(ck, "seed-payload-full", std::string(1, '\0') + full.serialize());
  put(ck, "seed-payload-weights", std::string(1, '\0') + weights.serialize());
  put(ck, "seed-wrapped-full", std::string(1, '\1') + full.serialize());
  const std::string tmp = fuzz::scratch_path("seed.ckpt");
  full.save(tmp);
  put(ck, "seed-file-full", std::string(1, '\2') + slurp(tmp));
  fs::remove(tmp);
  put(ck, "seed-file-v1-fixture", std::string(1, '\2') + slurp(src / "tests/fixtures/checkpoint/v1.ckpt"));

  // ---- npz: ours, numpy's (float64, Fortran order, zip64 headers) and a compressed one -----
  const fs::path npz = out / "npz";
  const std::string tmp_npz = fuzz::scratch_path("seed.npz");
  tg::export_npz(net, tmp_npz);
  put(npz, "seed-export", slurp(tmp_npz));
  tg::write_npz(tmp_npz, {{"scalar", tg::scalar(2.0f)}, {"empty", tg::zeros({0, 3})},
                          {"cube", tg::ones({2, 2, 2})}});
  put(npz, "seed-shapes", slurp(tmp_npz));
  fs::remove(tmp_npz);
  for (const char* f : {"numpy_savez.npz", "numpy_compressed.npz", "torch_mlp_io.npz"})
    put(npz, std::string("seed-") + f, slurp(src / "tests/fixtures/checkpoint" / f));

  // ---- inspect: whole files, as tapegrad-inspect reads them: checkpoints and npz archives,
  // a sound and a damaged one each, a checkpoint whose names hold control characters, and an
  // npz that lists one member twice (the overlap case) ------------------------------------------
  const fs::path inspect = out / "inspect";
  const std::string tmp_i = fuzz::scratch_path("seed-inspect.ckpt");
  full.save(tmp_i);
  put(inspect, "seed-checkpoint", slurp(tmp_i));
  for (const char* f : {"v1.ckpt", "v1_bad_crc.ckpt", "v1_truncated.ckpt", "numpy_savez.npz", "torch_mlp.npz"})
    put(inspect, std::string("seed-") + f, slurp(src / "tests/fixtures/checkpoint" / f));
  tg::Checkpoint odd;
  odd.metadata["\x1b]0;title\x07"] = "\x1b[2J\xc2\x9b";
  odd.states["s\x1b[31m"].strings["k"] = "\r\n";
  odd.save(tmp_i);
  put(inspect, "seed-escapes", slurp(tmp_i));
  fs::remove(tmp_i);
  {
    const std::string tmp_z = fuzz::scratch_path("seed-inspect.npz");
    tg::write_npz(tmp_z, {{"a", tg::ones({8})}});
    const std::string one = slurp(tmp_z);
    fs::remove(tmp_z);
    auto le = [&](size_t at, int n) {
      uint64_t v = 0;
      for (int i = 0; i < n; ++i) v |= uint64_t(static_cast<unsigned char>(one[at + i])) << (8 * i);
      return v;
    };
    const size_t eocd = one.size() - 22;
    const uint64_t cd_size = le(eocd + 12, 4), cd_offset = le(eocd + 16, 4);
    const std::string central = one.substr(cd_offset, cd_size);
    std::string twice = one.substr(0, cd_offset) + central + central + one.substr(eocd);
    auto set = [&](size_t at, uint64_t v, int n) {
      for (int i = 0; i < n; ++i) twice[at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
    };
    const size_t e2 = twice.size() - 22;
    set(e2 + 8, 2, 2);
    set(e2 + 10, 2, 2);
    set(e2 + 12, 2 * cd_size, 4);
    put(inspect, "seed-npz-overlap", twice);
    put(npz, "seed-overlap", twice);
  }

  // ---- words: the first rows of the shipped dataset, and a few odd ones --------------------
  const fs::path words = out / "words", ds = src / "datasets/words";
  const std::string sep = "\n===\n";
  put(words, "seed-dataset", slurp(ds / "languages.txt") + sep.substr(1) + head(ds / "train.tsv", 12) +
                                 sep.substr(1) + head(ds / "val.tsv", 4) + sep.substr(1) +
                                 head(ds / "test.tsv", 4));
  put(words, "seed-small", "en\nde\n===\nen\thello\nde\tgrüße\n===\nen\tworld\n===\nde\tstraße\n");
  put(words, "seed-utf8", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 abc");

  // ---- points: the example's CSV, and one with a header, CRLF, blanks and exponents -------
  const fs::path points = out / "points";
  put(points, "seed-xor", slurp(src / "examples/tests/xor.csv"));
  put(points, "seed-mixed", "x,y,label\r\n0.5,-1,1\r\n\n-2 3.25 0\n1e-3,4,1\n7,8,0\n");
  std::cout << "seeds written under " << out << "\n";
  return 0;
}
