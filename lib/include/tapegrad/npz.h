#pragma once
// numpy interop: .npz files, the uncompressed zip archives of .npy arrays that np.savez
// writes and np.load reads. Arrays are named by the dotted PyTorch-style keys of
// Module::named_state() ("fc1.weight"), float32, little-endian, C order.
//
//   tg::export_npz(*model, "checkpoints/mlp.npz");
//   tg::import_npz(*model, "checkpoints/mlp.npz");   // strict, all or nothing, like tg::load
//
// In Python, to PyTorch and back:
//   sd = {k: torch.from_numpy(v) for k, v in np.load("mlp.npz").items()}
//   torch_model.load_state_dict(sd)
//   np.savez("mlp.npz", **{k: v.numpy() for k, v in torch_model.state_dict().items()})
//
// Reading accepts what np.savez writes (including its zip64 local headers): stored (not
// compressed) members named "<key>.npy", .npy format 1.0 to 3.0, float32 or float64
// (converted to float32), either byte order, C or Fortran order. Everything is validated:
// the zip records, every member's CRC-32, the .npy header and the data size. np.savez_compressed
// output and other dtypes are refused with a tg::CheckpointError saying so.
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/checkpoint.h"

namespace tg {

/// Writes module.named_state() as an npz (atomically, like Checkpoint::save).
void export_npz(const nn::Module& module, const std::string& path);
/// Loads an npz into the module's parameters and buffers, validating every key and shape
/// first (strict by default: any misfit throws tg::CheckpointError and nothing changes).
LoadReport import_npz(nn::Module& module, const std::string& path,
                      const LoadOptions& options = LoadOptions());

/// Writes named arrays as "<name>.npy" members of an uncompressed npz.
void write_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& arrays);
/// Every array of an npz, in archive order, as float32 tensors.
std::vector<std::pair<std::string, Tensor>> read_npz(const std::string& path);

}  // namespace tg
