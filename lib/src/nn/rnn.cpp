// Recurrent layers. RNNCell is written with tapegrad ops and reads like the equation. The
// sequence modules run each layer as one GEMM projecting every step's input (tg::linear),
// then one op for the whole recurrence (ops/recurrent.h: the forward and its hand-written
// backpropagation through time). LSTMCell and GRUCell run the same recurrence ops for a
// single step.
//
// Legend: T = time steps, B = batch, C = input features, H = hidden size, L = layers,
// G = gate rows (H for RNN, 4H for LSTM, 3H for GRU).
#include "tapegrad/nn/rnn.h"

#include <algorithm>
#include <cmath>

#include "ops/recurrent.h"
#include "tapegrad/nn/init.h"
#include "tapegrad/ops.h"

namespace tg {
namespace nn {

namespace {

// ---- checks shared by the cells ---------------------------------------------------------------

void check_sizes(const Module& m, int64_t input_size, int64_t hidden_size) {
  if (input_size <= 0 || hidden_size <= 0)
    throw ValueError(m.where() + ": input_size and hidden_size must be positive, got " +
                     std::to_string(input_size) + " and " + std::to_string(hidden_size));
}

/// x (B, C) or (C); returns the shape a state must have: (B, H) or (H).
Shape check_cell_input(const Module& m, const Tensor& x, int64_t input_size, int64_t hidden_size) {
  if (!x.defined()) throw ValueError(m.where() + ": input is undefined");
  const Shape s = x.shape();
  if (s.empty() || s.size() > 2)
    throw ShapeError(m.where() + ": input must be (B, C) or unbatched (C), got shape " +
                     to_string(s));
  if (s.back() != input_size)
    throw ShapeError(m.where() + ": input last dim " + std::to_string(s.back()) + ", expected " +
                     std::to_string(input_size) + ", input shape " + to_string(s));
  Shape state = s;
  state.back() = hidden_size;
  return state;
}

/// The state as given, or zeros of the expected shape if undefined.
Tensor state_or_zeros(const Module& m, const char* name, const Tensor& h, const Shape& expected) {
  if (!h.defined()) return zeros(expected);
  if (h.shape() != expected)
    throw ShapeError(m.where() + ": " + name + " shape " + to_string(h.shape()) + ", expected " +
                     to_string(expected));
  return h;
}

std::string sizes_signature(int64_t in, int64_t hidden) {
  return std::to_string(in) + "→" + std::to_string(hidden);
}

}  // namespace

// ---- RNNCell -----------------------------------------------------------------------------------

RNNCell::RNNCell(const RNNCellOptions& o) : Cloneable("RNNCell"), options(o) {
  check_sizes(*this, o.input_size(), o.hidden_size());
  if (o.nonlinearity() != "tanh" && o.nonlinearity() != "relu")
    value_error("nonlinearity must be \"tanh\" or \"relu\", got \"" + o.nonlinearity() + "\"");
  i2h = register_module("i2h", std::make_shared<Linear>(
                                   LinearOptions(o.input_size(), o.hidden_size()).bias(o.bias())));
  h2h = register_module("h2h", std::make_shared<Linear>(
                                   LinearOptions(o.hidden_size(), o.hidden_size()).bias(o.bias())));
  reset_parameters();
}

void RNNCell::reset_parameters() {
  const float k = 1.0f / std::sqrt(static_cast<float>(options.hidden_size()));
  for (const Tensor& p : parameters()) init::uniform_(p, -k, k);
}

// h' = act(i2h(x) + h2h(h))
Tensor RNNCell::forward(const Tensor& x, const Tensor& h) const {
  const auto scope = this->scope();  // names this module in anomaly reports
  const Shape hs = check_cell_input(*this, x, options.input_size(), options.hidden_size());
  const Tensor pre = i2h->forward(x) + h2h->forward(state_or_zeros(*this, "h", h, hs));
  return options.nonlinearity() == "relu" ? relu(pre) : tanh(pre);
}

std::string RNNCell::extra_repr() const {
  return "input_size=" + std::to_string(options.input_size()) +
         ", hidden_size=" + std::to_string(options.hidden_size()) +
         ", bias=" + (options.bias() ? "true" : "false") + ", nonlinearity=" + options.nonlinearity();
}
std::string RNNCell::signature() const { return sizes_signature(options.input_size(), options.hidden_size()); }

// ---- LSTMCell and GRUCell ------------------------------------------------------------------------

namespace {
/// Registers weight_ih (G, C), weight_hh (G, H), bias_ih, bias_hh (G) in PyTorch's order.
void register_cell(Module& m, int64_t gates, const LSTMCellOptions& o, Tensor& w_ih, Tensor& w_hh,
                   Tensor& b_ih, Tensor& b_hh) {
  check_sizes(m, o.input_size(), o.hidden_size());
  const int64_t G = gates * o.hidden_size();
  w_ih = m.register_parameter("weight_ih", zeros({G, o.input_size()}));
  w_hh = m.register_parameter("weight_hh", zeros({G, o.hidden_size()}));
  if (o.bias()) {
    b_ih = m.register_parameter("bias_ih", zeros({G}));
    b_hh = m.register_parameter("bias_hh", zeros({G}));
  }
}

void uniform_all(const Module& m, int64_t hidden_size) {
  const float k = 1.0f / std::sqrt(static_cast<float>(hidden_size));
  for (const Tensor& p : m.parameters()) init::uniform_(p, -k, k);
}

std::string cell_repr(const LSTMCellOptions& o) {
  return "input_size=" + std::to_string(o.input_size()) +
         ", hidden_size=" + std::to_string(o.hidden_size()) + ", bias=" + (o.bias() ? "true" : "false");
}
}  // namespace

LSTMCell::LSTMCell(const LSTMCellOptions& o) : Cloneable("LSTMCell"), options(o) {
  register_cell(*this, 4, o, weight_ih, weight_hh, bias_ih, bias_hh);
  reset_parameters();
}

void LSTMCell::reset_parameters() { uniform_all(*this, options.hidden_size()); }

// [i f g o] = x W_ihᵀ + b_ih + h W_hhᵀ + b_hh;  c' = σ(f) c + σ(i) tanh(g);  h' = σ(o) tanh(c')
// One step of the fused recurrence: 7 tape nodes instead of about 17 for the same ops.
LSTMState LSTMCell::forward(const Tensor& x, const LSTMState& state) const {
  const auto scope = this->scope();  // names this module in anomaly reports
  const Shape hs = check_cell_input(*this, x, options.input_size(), options.hidden_size());
  const Tensor h = state_or_zeros(*this, "h", state.h, hs);
  const Tensor c = state_or_zeros(*this, "c", state.c, hs);
  const int64_t B = x.dim() == 1 ? 1 : x.size(0);
  const Tensor xp = reshape(linear(x, weight_ih, bias_ih), {1, B, 4 * options.hidden_size()});
  const Tensor z = detail::lstm_recurrence(xp, h, c, weight_hh, bias_hh);  // (2, B, H): h', c'
  return {reshape(narrow(z, 0, 0, 1), hs), reshape(narrow(z, 0, 1, 1), hs)};
}

std::string LSTMCell::extra_repr() const { return cell_repr(options); }
std::string LSTMCell::signature() const { return sizes_signature(options.input_size(), options.hidden_size()); }

GRUCell::GRUCell(const GRUCellOptions& o) : Cloneable("GRUCell"), options(o) {
  register_cell(*this, 3, o, weight_ih, weight_hh, bias_ih, bias_hh);
  reset_parameters();
}

void GRUCell::reset_parameters() { uniform_all(*this, options.hidden_size()); }

// r, z = σ(x W_ir,izᵀ + b_ir,iz + h W_hr,hzᵀ + b_hr,hz);  n = tanh(x W_inᵀ + b_in + r (h W_hnᵀ + b_hn))
// h' = (1 - z) n + z h, as one step of the fused recurrence.
Tensor GRUCell::forward(const Tensor& x, const Tensor& h_in) const {
  const auto scope = this->scope();  // names this module in anomaly reports
  const Shape hs = check_cell_input(*this, x, options.input_size(), options.hidden_size());
  const Tensor h = state_or_zeros(*this, "h", h_in, hs);
  const int64_t B = x.dim() == 1 ? 1 : x.size(0);
  const Tensor xp = reshape(linear(x, weight_ih, bias_ih), {1, B, 3 * options.hidden_size()});
  return reshape(detail::gru_recurrence(xp, h, weight_hh, bias_hh), hs);
}

std::string GRUCell::extra_repr() const { return cell_repr(options); }
std::string GRUCell::signature() const { return sizes_signature(options.input_size(), options.hidden_size()); }

// ---- RNN, LSTM, GRU ------------------------------------------------------------------------------

RNNBase::RNNBase(const char* type_name, Kind kind, const RNNOptions& o)
    : Module(type_name), options(o), kind_(kind) {
  check_sizes(*this, o.input_size(), o.hidden_size());
  if (o.num_layers() < 1) value_error("num_layers must be at least 1, got " + std::to_string(o.num_layers()));
  if (!(o.dropout() >= 0.0f && o.dropout() < 1.0f))
    value_error("dropout must be in [0, 1), got " + std::to_string(o.dropout()));
  const int64_t gates = kind == Kind::LSTM ? 4 : kind == Kind::GRU ? 3 : 1;
  const int64_t G = gates * o.hidden_size();
  for (int64_t l = 0; l < o.num_layers(); ++l) {
    const std::string sfx = "_l" + std::to_string(l);
    const int64_t in = l == 0 ? o.input_size() : o.hidden_size();
    weight_ih.push_back(register_parameter("weight_ih" + sfx, zeros({G, in})));
    weight_hh.push_back(register_parameter("weight_hh" + sfx, zeros({G, o.hidden_size()})));
    if (o.bias()) {
      bias_ih.push_back(register_parameter("bias_ih" + sfx, zeros({G})));
      bias_hh.push_back(register_parameter("bias_hh" + sfx, zeros({G})));
    } else {
      bias_ih.emplace_back();
      bias_hh.emplace_back();
    }
  }
  reset_parameters();
}

void RNNBase::reset_parameters() { uniform_all(*this, options.hidden_size()); }

Tensor RNNBase::prepare(const Tensor& x, const std::vector<std::pair<const char*, Tensor>>& states,
                        bool& unbatched) const {
  if (!x.defined()) value_error("input is undefined");
  const Shape s = x.shape();
  const char* layout = options.batch_first() ? "(B, T, C)" : "(T, B, C)";
  if (s.size() != 2 && s.size() != 3)
    shape_error(std::string("input must be ") + layout + " or unbatched (T, C), got shape " +
                to_string(s));
  if (s.back() != options.input_size())
    shape_error("input last dim " + std::to_string(s.back()) + ", expected " +
                std::to_string(options.input_size()) + ", input shape " + to_string(s));
  unbatched = s.size() == 2;
  const int64_t T = unbatched || !options.batch_first() ? s[0] : s[1];
  const int64_t B = unbatched ? 1 : options.batch_first() ? s[0] : s[1];
  if (T == 0 || B == 0) shape_error("empty input, shape " + to_string(s));
  const Shape expected = unbatched ? Shape{options.num_layers(), options.hidden_size()}
                                   : Shape{options.num_layers(), B, options.hidden_size()};
  for (const auto& [name, t] : states)
    if (t.defined() && t.shape() != expected)
      shape_error(std::string(name) + " shape " + to_string(t.shape()) + ", expected " +
                  to_string(expected) + " (num_layers, batch, hidden_size) for input shape " +
                  to_string(s));
  if (unbatched) return unsqueeze(x, 1);
  return options.batch_first() ? transpose(x, 0, 1) : x;
}

void RNNBase::run(const Tensor& x, const Tensor& h0, const Tensor& c0, Tensor& output,
                  Tensor& h_n, Tensor& c_n) const {
  const int64_t T = x.size(0), B = x.size(1), H = options.hidden_size(), L = options.num_layers();
  auto layer_state = [&](const Tensor& s, int64_t l) {
    if (!s.defined()) return zeros({B, H});
    return L == 1 ? s : narrow(s, 0, l, 1);
  };
  std::vector<Tensor> hs, cs;
  Tensor in = x;
  for (int64_t l = 0; l < L; ++l) {
    const Tensor xp = linear(in, weight_ih[l], bias_ih[l]);  // (T, B, G), one GEMM
    const Tensor h0l = layer_state(h0, l);
    Tensor y;
    if (kind_ == Kind::LSTM) {
      const Tensor z = detail::lstm_recurrence(xp, h0l, layer_state(c0, l), weight_hh[l], bias_hh[l]);  // (T+1, B, H)
      y = narrow(z, 0, 0, T);
      cs.push_back(narrow(z, 0, T, 1));
    } else if (kind_ == Kind::GRU) {
      y = detail::gru_recurrence(xp, h0l, weight_hh[l], bias_hh[l]);
    } else {
      y = detail::elman_recurrence(kind_ == Kind::Relu, xp, h0l, weight_hh[l], bias_hh[l]);
    }
    hs.push_back(narrow(y, 0, T - 1, 1));
    const bool drop = l + 1 < L && options.dropout() > 0.0f && is_training();
    in = drop ? dropout(y, options.dropout(), true) : y;
    if (l + 1 == L) output = y;
  }
  h_n = L == 1 ? hs[0] : cat(hs, 0);
  if (kind_ == Kind::LSTM) c_n = L == 1 ? cs[0] : cat(cs, 0);
}

void RNNBase::finish(bool unbatched, Tensor& output, Tensor& h_n, Tensor& c_n) const {
  if (unbatched) {
    output = squeeze(output, 1);
    h_n = squeeze(h_n, 1);
    if (c_n.defined()) c_n = squeeze(c_n, 1);
  } else if (options.batch_first()) {
    output = transpose(output, 0, 1);
  }
}

RNNOutput RNNBase::run_hidden(const Tensor& x, const Tensor& h0) const {
  bool unbatched = false;
  const Tensor xs = prepare(x, {{"h0", h0}}, unbatched);
  RNNOutput r;
  Tensor none;
  run(xs, unbatched && h0.defined() ? unsqueeze(h0, 1) : h0, Tensor(), r.output, r.h_n, none);
  finish(unbatched, r.output, r.h_n, none);
  return r;
}

std::string RNNBase::extra_repr() const {
  std::string r = "input_size=" + std::to_string(options.input_size()) +
                  ", hidden_size=" + std::to_string(options.hidden_size()) +
                  ", num_layers=" + std::to_string(options.num_layers()) +
                  ", bias=" + (options.bias() ? "true" : "false") +
                  ", batch_first=" + (options.batch_first() ? "true" : "false");
  if (options.dropout() > 0.0f) r += ", dropout=" + std::to_string(options.dropout());
  if (kind_ == Kind::Relu) r += ", nonlinearity=relu";
  return r;
}
std::string RNNBase::signature() const { return sizes_signature(options.input_size(), options.hidden_size()); }

RNN::RNN(const RNNOptions& o)
    : Cloneable("RNN", o.nonlinearity() == "relu" ? Kind::Relu : Kind::Tanh, o) {
  if (o.nonlinearity() != "tanh" && o.nonlinearity() != "relu")
    value_error("nonlinearity must be \"tanh\" or \"relu\", got \"" + o.nonlinearity() + "\"");
}

RNNOutput RNN::forward(const Tensor& x, const Tensor& h0) const {
  const auto scope = this->scope();  // names this module in anomaly reports
  return run_hidden(x, h0);
}

LSTM::LSTM(const LSTMOptions& o) : Cloneable("LSTM", Kind::LSTM, o) {}

LSTMOutput LSTM::forward(const Tensor& x, const LSTMState& s) const {
  const auto scope = this->scope();  // names this module in anomaly reports
  bool unbatched = false;
  const Tensor xs = prepare(x, {{"h0", s.h}, {"c0", s.c}}, unbatched);
  auto batched = [&](const Tensor& t) { return unbatched && t.defined() ? unsqueeze(t, 1) : t; };
  LSTMOutput r;
  run(xs, batched(s.h), batched(s.c), r.output, r.h_n, r.c_n);
  finish(unbatched, r.output, r.h_n, r.c_n);
  return r;
}

GRU::GRU(const GRUOptions& o) : Cloneable("GRU", Kind::GRU, o) {}

RNNOutput GRU::forward(const Tensor& x, const Tensor& h0) const {
  const auto scope = this->scope();  // names this module in anomaly reports
  return run_hidden(x, h0);
}

}  // namespace nn
}  // namespace tg
