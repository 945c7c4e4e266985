#pragma once
// Library-internal, the ops layer: the fused recurrences behind nn::RNN, LSTM and GRU (and one
// step of LSTMCell and GRUCell). Each runs a whole sequence as one tape node whose backward is
// hand-written backpropagation through time. Not installed.
//
// Legend: T = time steps, B = batch, H = hidden size, G = gate rows (H for Elman, 4H for LSTM,
// 3H for GRU). Every recurrence takes xp (T, B, G) = x W_ihᵀ + b_ih for all steps at once (one
// GEMM, done by the caller), h0 (and c0) holding B·H values ((B, H) or (1, B, H)), w_hh (G, H)
// and b_hh (G) or undefined. Gate blocks are in PyTorch's order.
#include "tapegrad/tensor.h"

namespace tg {
namespace detail {

/// Elman: h_t = act(xp_t + h_{t-1} W_hhᵀ + b_hh), act = tanh or relu -> hs (T, B, H).
Tensor elman_recurrence(bool relu, const Tensor& xp, const Tensor& h0, const Tensor& w_hh,
                        const Tensor& b_hh);

/// LSTM: [a_i a_f a_g a_o] = xp_t + h_{t-1} W_hhᵀ + b_hh; i, f, o = σ(·), g = tanh(a_g);
/// c_t = f c_{t-1} + i g; h_t = o tanh(c_t) -> (T + 1, B, H): h_0 … h_{T-1}, then c_{T-1}.
Tensor lstm_recurrence(const Tensor& xp, const Tensor& h0, const Tensor& c0, const Tensor& w_hh,
                       const Tensor& b_hh);

/// GRU: [gh_r gh_z gh_n] = h_{t-1} W_hhᵀ + b_hh, [x_r x_z x_n] = xp_t; r = σ(x_r + gh_r),
/// z = σ(x_z + gh_z), n = tanh(x_n + r gh_n), h_t = (1 - z) n + z h_{t-1} -> hs (T, B, H).
Tensor gru_recurrence(const Tensor& xp, const Tensor& h0, const Tensor& w_hh, const Tensor& b_hh);

}  // namespace detail
}  // namespace tg
