#pragma once
// Recurrent layers: the cells RNNCell, LSTMCell and GRUCell (one step), and the sequence
// modules RNN, LSTM and GRU (several layers over a whole sequence), with PyTorch's equations.
//
// Legend: T = time steps, B = batch, C = input features (input_size), H = hidden_size,
// L = num_layers, G = gate rows (H for RNN, 4H for LSTM, 3H for GRU).
//
//   RNN   h' = tanh(W_ih x + b_ih + W_hh h + b_hh)          (or relu)
//   LSTM  i, f, g, o = σ, σ, tanh, σ of the four H-blocks of W_ih x + b_ih + W_hh h + b_hh
//         c' = f * c + i * g,   h' = o * tanh(c')
//   GRU   r, z = σ of the first two H-blocks of W_ih x + b_ih + W_hh h + b_hh
//         n = tanh(W_in x + b_in + r * (W_hn h + b_hn)),   h' = (1 - z) * n + z * h
//
// Parameters and PyTorch: every weight is initialised U(-1/√H, 1/√H), as in PyTorch, and the
// names are PyTorch's state_dict keys, except for RNNCell:
//
//   tapegrad                          PyTorch                          shape
//   RNNCell   i2h.weight, i2h.bias    nn.RNNCell weight_ih, bias_ih    (H, C), (H)
//             h2h.weight, h2h.bias               weight_hh, bias_hh    (H, H), (H)
//   LSTMCell  weight_ih, weight_hh, bias_ih, bias_hh   (same names)    (4H, C), (4H, H), (4H)
//   GRUCell   weight_ih, weight_hh, bias_ih, bias_hh   (same names)    (3H, C), (3H, H), (3H)
//   RNN/LSTM/GRU layer k: weight_ih_lk, weight_hh_lk, bias_ih_lk, bias_hh_lk (same names),
//             (G, C) for k = 0 and (G, H) above; gate blocks in PyTorch's order: LSTM (i, f, g, o),
//             GRU (r, z, n).
//
// So a PyTorch state_dict loads key by key (RNNCell: i2h.weight <- weight_ih, ...).
// Not supported: bidirectional, LSTM proj_size, packed sequences.
#include <memory>
#include <string>
#include <vector>

#include "tapegrad/arg.h"
#include "tapegrad/nn/cloneable.h"
#include "tapegrad/nn/linear.h"
#include "tapegrad/nn/module.h"

namespace tg {
namespace nn {

// ---- cells ----------------------------------------------------------------------------------

struct RNNCellOptions {
  RNNCellOptions(int64_t input_size, int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  TG_ARG(int64_t, input_size);
  TG_ARG(int64_t, hidden_size);
  TG_ARG(bool, bias) = true;
  /// "tanh" (default) or "relu".
  TG_ARG(std::string, nonlinearity) = "tanh";
};

/// The Elman cell of our notes: h' = tanh(i2h(x) + h2h(h)), with two Linear submodules.
class RNNCell : public Cloneable<RNNCell> {
 public:
  explicit RNNCell(const RNNCellOptions& options);
  RNNCell(int64_t input_size, int64_t hidden_size) : RNNCell(RNNCellOptions(input_size, hidden_size)) {}

  /// x (B, C), h (B, H) or undefined (zeros) -> h' (B, H). Unbatched: x (C), h (H) -> (H).
  Tensor forward(const Tensor& x, const Tensor& h = Tensor()) const;
  /// U(-1/√H, 1/√H) for every weight and bias.
  void reset_parameters();

  std::string extra_repr() const override;
  std::string signature() const override;

  RNNCellOptions options;
  std::shared_ptr<Linear> i2h;  // weight (H, C), bias (H)
  std::shared_ptr<Linear> h2h;  // weight (H, H), bias (H)
};

struct LSTMCellOptions {
  LSTMCellOptions(int64_t input_size, int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  TG_ARG(int64_t, input_size);
  TG_ARG(int64_t, hidden_size);
  TG_ARG(bool, bias) = true;
};
using GRUCellOptions = LSTMCellOptions;

/// The state an LSTM carries: hidden h and cell c, each (B, H) (undefined = zeros).
struct LSTMState {
  Tensor h;
  Tensor c;
};

class LSTMCell : public Cloneable<LSTMCell> {
 public:
  explicit LSTMCell(const LSTMCellOptions& options);
  LSTMCell(int64_t input_size, int64_t hidden_size) : LSTMCell(LSTMCellOptions(input_size, hidden_size)) {}

  /// x (B, C), state {h (B, H), c (B, H)} (undefined parts are zeros) -> {h', c'} (B, H).
  LSTMState forward(const Tensor& x, const LSTMState& state = LSTMState()) const;
  void reset_parameters();

  std::string extra_repr() const override;
  std::string signature() const override;

  LSTMCellOptions options;
  Tensor weight_ih;  // (4H, C), blocks (i, f, g, o)
  Tensor weight_hh;  // (4H, H)
  Tensor bias_ih;    // (4H), undefined without bias
  Tensor bias_hh;    // (4H)
};

class GRUCell : public Cloneable<GRUCell> {
 public:
  explicit GRUCell(const GRUCellOptions& options);
  GRUCell(int64_t input_size, int64_t hidden_size) : GRUCell(GRUCellOptions(input_size, hidden_size)) {}

  /// x (B, C), h (B, H) or undefined (zeros) -> h' (B, H).
  Tensor forward(const Tensor& x, const Tensor& h = Tensor()) const;
  void reset_parameters();

  std::string extra_repr() const override;
  std::string signature() const override;

  GRUCellOptions options;
  Tensor weight_ih;  // (3H, C), blocks (r, z, n)
  Tensor weight_hh;  // (3H, H)
  Tensor bias_ih;    // (3H), undefined without bias
  Tensor bias_hh;    // (3H)
};

// ---- sequence modules ------------------------------------------------------------------------

struct RNNOptions {
  RNNOptions(int64_t input_size, int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  TG_ARG(int64_t, input_size);
  TG_ARG(int64_t, hidden_size);
  TG_ARG(int64_t, num_layers) = 1;
  TG_ARG(bool, bias) = true;
  /// Input and output (B, T, ·) instead of (T, B, ·); the states stay (L, B, H).
  TG_ARG(bool, batch_first) = false;
  /// Dropout on the outputs of every layer but the last, in training mode.
  TG_ARG(float, dropout) = 0.0f;
  /// "tanh" (default) or "relu"; RNN only.
  TG_ARG(std::string, nonlinearity) = "tanh";
};
using LSTMOptions = RNNOptions;
using GRUOptions = RNNOptions;

/// What RNN and GRU return: every step's top-layer hidden state, and each layer's last one.
struct RNNOutput {
  Tensor output;  // (T, B, H), or (B, T, H) with batch_first
  Tensor h_n;     // (L, B, H)
};

struct LSTMOutput {
  Tensor output;  // (T, B, H), or (B, T, H) with batch_first
  Tensor h_n;     // (L, B, H)
  Tensor c_n;     // (L, B, H)
};

/// The common part of RNN, LSTM and GRU: options, per-layer parameters, shape checks.
/// Each layer projects the whole input sequence with one GEMM, then runs the recurrence as
/// one recorded op whose backward is the hand-written backpropagation through time.
class RNNBase : public Module {
 public:
  enum class Kind { Tanh, Relu, LSTM, GRU };
  Kind kind() const { return kind_; }
  void reset_parameters();
  std::string extra_repr() const override;
  std::string signature() const override;

  RNNOptions options;
  /// Per layer, the tensors registered as weight_ih_lk, weight_hh_lk, bias_ih_lk, bias_hh_lk.
  std::vector<Tensor> weight_ih, weight_hh, bias_ih, bias_hh;

 protected:
  RNNBase(const char* type_name, Kind kind, const RNNOptions& options);
  /// The input as (T, B, C) and whether it came unbatched; checks the states' shapes.
  Tensor prepare(const Tensor& x, const std::vector<std::pair<const char*, Tensor>>& states,
                 bool& unbatched) const;
  /// Runs every layer: returns the top output (T, B, H) and the per-layer last h (and c).
  void run(const Tensor& x, const Tensor& h0, const Tensor& c0, Tensor& output, Tensor& h_n,
           Tensor& c_n) const;
  /// Back to the caller's layout (batch_first, unbatched).
  void finish(bool unbatched, Tensor& output, Tensor& h_n, Tensor& c_n) const;
  /// The whole forward of RNN and GRU, whose state is h alone: prepare, run, finish.
  RNNOutput run_hidden(const Tensor& x, const Tensor& h0) const;

  Kind kind_;
};

/// Elman RNN over a sequence: x (T, B, C) [or (B, T, C), or unbatched (T, C)],
/// h0 (L, B, H) or undefined (zeros) -> {output (T, B, H), h_n (L, B, H)}.
class RNN : public Cloneable<RNN, RNNBase> {
 public:
  explicit RNN(const RNNOptions& options);
  RNN(int64_t input_size, int64_t hidden_size) : RNN(RNNOptions(input_size, hidden_size)) {}
  RNNOutput forward(const Tensor& x, const Tensor& h0 = Tensor()) const;
};

/// x (T, B, C), state {h0, c0} each (L, B, H) or undefined ->
/// {output (T, B, H), h_n (L, B, H), c_n (L, B, H)}.
class LSTM : public Cloneable<LSTM, RNNBase> {
 public:
  explicit LSTM(const LSTMOptions& options);
  LSTM(int64_t input_size, int64_t hidden_size) : LSTM(LSTMOptions(input_size, hidden_size)) {}
  LSTMOutput forward(const Tensor& x, const LSTMState& state0 = LSTMState()) const;
};

/// x (T, B, C), h0 (L, B, H) or undefined -> {output (T, B, H), h_n (L, B, H)}.
class GRU : public Cloneable<GRU, RNNBase> {
 public:
  explicit GRU(const GRUOptions& options);
  GRU(int64_t input_size, int64_t hidden_size) : GRU(GRUOptions(input_size, hidden_size)) {}
  RNNOutput forward(const Tensor& x, const Tensor& h0 = Tensor()) const;
};

}  // namespace nn
}  // namespace tg
