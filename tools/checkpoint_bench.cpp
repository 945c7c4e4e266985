// tapegrad-checkpoint-bench [FOLDER]: the size of a checkpoint against the raw parameter
// bytes, and save/load times, for an MLP 784-1024-256-10 (1,068,810 parameters).
// Writes FOLDER/bench.ckpt and FOLDER/bench.npz (default: checkpoints/). Times are the
// median of 7 runs; saves include fsync.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "tapegrad/tapegrad.h"

namespace {

struct Mlp : tg::nn::Module {
  Mlp() : Module("Mlp") {
    register_module("fc1", std::make_shared<tg::nn::Linear>(784, 1024));
    register_module("fc2", std::make_shared<tg::nn::Linear>(1024, 256));
    register_module("fc3", std::make_shared<tg::nn::Linear>(256, 10));
  }
};

double median_ms(const std::function<void()>& fn, int runs = 7) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

long file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<long>(st.st_size) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "checkpoints";
  const std::string ckpt = dir + "/bench.ckpt", npz = dir + "/bench.npz", full = dir + "/bench_full.ckpt";
  tg::manual_seed(0);
  auto model = std::make_shared<Mlp>();
  const int64_t n = model->num_parameters();
  const double raw = 4.0 * static_cast<double>(n);
  std::printf("model: MLP 784-1024-256-10, %lld parameters, %.0f raw bytes (float32)\n",
              static_cast<long long>(n), raw);

  const double t_save = median_ms([&] { tg::save(*model, ckpt); });
  auto other = std::make_shared<Mlp>();
  const double t_load = median_ms([&] { tg::load(*other, ckpt); });
  const double t_ser = median_ms([&] {
    tg::Checkpoint ck;
    ck.set_model(*model);
    (void)ck.serialize();
  });
  const std::string payload = [&] {
    tg::Checkpoint ck;
    ck.set_model(*model);
    return ck.serialize();
  }();
  const double t_crc = median_ms([&] { (void)tg::crc32(payload.data(), payload.size()); });
  const double t_npz_save = median_ms([&] { tg::export_npz(*model, npz); });
  const double t_npz_load = median_ms([&] { tg::import_npz(*other, npz); });

  // A whole training state: the model plus AdamW-like moments (two tensors per parameter).
  tg::Checkpoint ck;
  ck.set_model(*model);
  tg::StateDict opt;
  int i = 0;
  for (auto& p : model->parameters()) {
    opt.tensors["state." + std::to_string(i) + ".exp_avg"] = tg::zeros(p.shape());
    opt.tensors["state." + std::to_string(i) + ".exp_avg_sq"] = tg::zeros(p.shape());
    opt.numbers["state." + std::to_string(i++) + ".step"] = 100;
  }
  ck.set("optimizer", opt);
  ck.metadata["model"] = "mlp-784-1024-256-10";
  const double t_full_save = median_ms([&] { ck.save(full); });
  const double t_full_load = median_ms([&] {
    auto back = tg::Checkpoint::load(full);
    back.restore_model(*other);
  });

  const long s_ckpt = file_size(ckpt), s_npz = file_size(npz), s_full = file_size(full);
  std::printf("\n%-34s %12s %10s %10s %10s\n", "file", "bytes", "vs raw", "save ms", "load ms");
  std::printf("%-34s %12ld %+9.4f%% %10.2f %10.2f\n", "weights (tg::save)", s_ckpt,
              100.0 * (s_ckpt - raw) / raw, t_save, t_load);
  std::printf("%-34s %12ld %+9.4f%% %10.2f %10.2f\n", "npz (tg::export_npz)", s_npz,
              100.0 * (s_npz - raw) / raw, t_npz_save, t_npz_load);
  std::printf("%-34s %12ld %+9.4f%% %10.2f %10.2f\n", "model + AdamW moments (3x raw)", s_full,
              100.0 * (s_full - 3 * raw) / (3 * raw), t_full_save, t_full_load);
  std::printf("\nserialize only (no file): %.2f ms; CRC-32 of the payload: %.2f ms (%.2f GB/s)\n",
              t_ser, t_crc, payload.size() / t_crc / 1e6);
  return 0;
}
