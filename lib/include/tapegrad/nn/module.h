#pragma once
// tg::nn::Module: the base class of every layer, and of the modules users write.
//
// A module registers its parameters, buffers and submodules by name; traversal yields dotted
// names in registration order, exactly as PyTorch's state_dict keys read
// ("blocks.0.attn.q_proj.weight"). Modules are plain classes held by std::shared_ptr.
//
//   struct Affine : tg::nn::Module {
//     tg::Tensor w, b;
//     Affine(int64_t n) : Module("Affine") {
//       w = register_parameter("w", tg::ones({n}));
//       b = register_parameter("b", tg::zeros({n}));
//     }
//     tg::Tensor forward(const tg::Tensor& x) { return x * w + b; }
//   };
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/autograd.h"
#include "tapegrad/nn/holder.h"
#include "tapegrad/nn/ordered_dict.h"
#include "tapegrad/tensor.h"

namespace tg {
namespace nn {

class Module;
namespace impl {
/// Copies from's parameter and buffer values (and requires_grad) into `to`, whose structure
/// must be the same (names and shapes; tg::ValueError naming `who` otherwise), and every
/// submodule's training flag. What Cloneable::clone does after building a fresh module.
void copy_module_state(const Module& from, Module& to, const std::string& who);
}  // namespace impl

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name = "Module");
  virtual ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// Adds a parameter (a leaf that requires grad) and returns it.
  Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  /// Adds a buffer: state saved with the module that is not trained (running stats, masks).
  Tensor register_buffer(const std::string& name, Tensor t);
  /// Adds a submodule and returns it as a callable holder (fc1(x)); its path becomes
  /// "<this path>.<name>".
  template <class M>
  ModuleHolder<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  /// Parameters of this module and (if recurse) all submodules, in registration order.
  std::vector<Tensor> parameters(bool recurse = true) const;
  /// By dotted name: named_parameters()["fc1.weight"], .contains(name), .find(name).
  OrderedDict<Tensor> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  OrderedDict<Tensor> named_buffers(bool recurse = true) const;
  /// Parameters then buffers: everything a checkpoint of this module holds.
  std::vector<std::pair<std::string, Tensor>> named_state() const;
  /// Parameters then buffers by dotted name, as PyTorch's state_dict(): detached aliases
  /// (writing one writes the module). tg::load_state_dict (checkpoint.h) loads one back.
  OrderedDict<Tensor> state_dict() const;
  /// Direct submodules.
  std::vector<std::shared_ptr<Module>> children() const;
  OrderedDict<std::shared_ptr<Module>> named_children() const;
  /// This module (name "") and every descendant, depth first.
  OrderedDict<std::shared_ptr<Module>> named_modules();

  /// A deep copy: parameters and buffers in new storage (values and requires_grad, no
  /// gradients), submodules, training flags; nothing shared with this module or its tape.
  /// The built-in modules have it; a module of yours gains it by deriving from
  /// tg::nn::Cloneable<YourModule> (cloneable.h) instead of Module. Here it throws
  /// tg::ValueError, as LibTorch.
  virtual std::shared_ptr<Module> clone() const;
  /// A parameter or buffer by its dotted name (e.g. "blocks.0.ln1.weight"); throws
  /// tg::IndexError naming the closest container if there is none.
  Tensor find(const std::string& dotted_name) const;

  /// Training mode, applied recursively (dropout is active only in training).
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  /// Zeroes every parameter's gradient; set_to_none drops the buffers instead.
  void zero_grad(bool set_to_none = false);
  int64_t num_parameters() const;

  /// "Linear"
  const std::string& type_name() const { return type_name_; }
  /// The dotted path from the root module ("" for the root): "blocks.1.attn.q_proj". Built
  /// from the chain of parents when asked (a module registered in two places takes the
  /// path of the last registration).
  std::string path() const;
  /// Where errors happen: "blocks.1.attn.q_proj (Linear 64→64)".
  std::string where() const;
  /// Names this module in anomaly reports while it lives (tg::ModuleScope of where(), built
  /// only while anomaly detection is on): `auto scope = this->scope();` first in forward.
  ModuleScope scope() const;

  /// One line of options shown in the tree: "in_features=3, out_features=2, bias=true".
  virtual std::string extra_repr() const { return ""; }
  /// A short signature for error messages: "64→64" for Linear. Defaults to "".
  virtual std::string signature() const { return ""; }
  /// The printable tree, like PyTorch's repr, with parameter shapes and counts.
  std::string repr() const;

 protected:
  /// Throws tg::ShapeError prefixed with where(): "q_proj (Linear 64→64): <what>".
  [[noreturn]] void shape_error(const std::string& what) const;
  [[noreturn]] void value_error(const std::string& what) const;
  /// For containers: tg::IndexError naming this module unless i < n.
  void check_index(size_t i, size_t n) const;
  /// For containers: tg::ValueError saying that module i (`m`) is not the type asked for.
  [[noreturn]] void type_mismatch(size_t i, const Module& m) const;
  /// For containers: moves child `from` to position `to` and renames the children "0", "1", ...
  void move_child_and_renumber(size_t from, size_t to);

 private:
  friend void impl::copy_module_state(const Module& from, Module& to, const std::string& who);
  void add_child(const std::string& name, std::shared_ptr<Module> child);

  void check_name(const std::string& name, const char* kind) const;
  /// Appends (prefix + dotted name, tensor) of the parameters (or buffers), depth first.
  void collect(const std::string& prefix, bool recurse, bool buffers,
               std::vector<std::pair<std::string, Tensor>>& out) const;
  void repr_into(std::string& out, int indent) const;

  std::string type_name_;
  Module* parent_ = nullptr;  // the last module it was registered in (cleared if that dies)
  std::string name_;          // its name there
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

std::ostream& operator<<(std::ostream& os, const Module& m);

}  // namespace nn
}  // namespace tg
