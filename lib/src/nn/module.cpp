// tg::nn::Module: registration, traversal, modes and the printable tree.
#include <ostream>

#include "tapegrad/nn/module.h"
#include "tapegrad/nn/unary.h"

namespace tg {
namespace nn {

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}

void Module::check_name(const std::string& name, const char* kind) const {
  if (name.empty() || name.find('.') != std::string::npos)
    throw ValueError(where() + ": " + kind + " name '" + name +
                     "' must be non-empty and contain no '.'");
  auto taken = [&](const auto& list) {
    for (const auto& e : list)
      if (e.first == name) return true;
    return false;
  };
  if (taken(params_) || taken(buffers_) || taken(children_))
    throw ValueError(where() + ": the name '" + name + "' is already registered");
}

Tensor Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_name(name, "parameter");
  if (!t.defined()) throw ValueError(where() + ": parameter '" + name + "' is undefined");
  if (!t.is_leaf()) t = t.detach();
  t.requires_grad_(requires_grad);
  params_.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
  check_name(name, "buffer");
  if (!t.defined()) throw ValueError(where() + ": buffer '" + name + "' is undefined");
  buffers_.emplace_back(name, t);
  return t;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> child) {
  check_name(name, "module");
  if (!child) throw ValueError(where() + ": submodule '" + name + "' is null");
  // This module inside its own subtree would make every traversal endless (parameters()
  // recursed until the stack overflowed).
  std::vector<const Module*> stack{child.get()};
  while (!stack.empty()) {
    const Module* m = stack.back();
    stack.pop_back();
    if (m == this)
      value_error("registering submodule '" + name + "' (" + child->type_name() +
                  ") would put this module inside itself");
    for (const auto& [n, c] : m->children_) stack.push_back(c.get());
  }
  // Paths are built from the parent chain when asked, so registering costs nothing per
  // descendant (setting every descendant's path made deep nesting cubic: 10,000 levels, 182 s).
  child->parent_ = this;
  child->name_ = name;
  children_.emplace_back(name, std::move(child));
}

Module::~Module() {
  for (auto& [name, c] : children_)
    if (c && c->parent_ == this) c->parent_ = nullptr;  // a child may outlive its parent
}

std::string Module::path() const {
  std::vector<const std::string*> names;
  for (const Module* m = this; m->parent_; m = m->parent_) names.push_back(&m->name_);
  std::string out;
  for (size_t i = names.size(); i-- > 0;) {
    out += *names[i];
    if (i) out += '.';
  }
  return out;
}

void Module::collect(const std::string& prefix, bool recurse, bool buffers,
                     std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [name, t] : buffers ? buffers_ : params_) out.emplace_back(prefix + name, t);
  if (!recurse) return;
  for (const auto& [name, c] : children_) c->collect(prefix + name + ".", true, buffers, out);
}

namespace {
OrderedDict<Tensor> to_dict(std::vector<std::pair<std::string, Tensor>> pairs, const char* what) {
  OrderedDict<Tensor> out(what);
  for (auto& [n, t] : pairs) out.insert(std::move(n), std::move(t));
  return out;
}
}  // namespace

OrderedDict<Tensor> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", recurse, false, out);
  return to_dict(std::move(out), "Parameter");
}

OrderedDict<Tensor> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", recurse, true, out);
  return to_dict(std::move(out), "Buffer");
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> named;
  collect("", recurse, false, named);
  std::vector<Tensor> out;
  for (auto& [n, t] : named) out.push_back(t);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> named;
  collect("", recurse, true, named);
  std::vector<Tensor> out;
  for (auto& [n, t] : named) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", true, false, out);
  collect("", true, true, out);
  return out;
}

OrderedDict<Tensor> Module::state_dict() const {
  auto state = named_state();
  for (auto& [n, t] : state) t = t.detach();  // aliases cut from the tape, as PyTorch's
  return to_dict(std::move(state), "Key");
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [n, c] : children_) out.push_back(c);
  return out;
}

OrderedDict<std::shared_ptr<Module>> Module::named_children() const {
  OrderedDict<std::shared_ptr<Module>> out("Module");
  for (const auto& [n, c] : children_) out.insert(n, c);
  return out;
}

OrderedDict<std::shared_ptr<Module>> Module::named_modules() {
  OrderedDict<std::shared_ptr<Module>> out("Module");
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> stack{{"", shared_from_this()}};
  while (!stack.empty()) {
    auto [prefix, m] = stack.back();
    stack.pop_back();
    out.insert(prefix, m);
    for (auto it = m->children_.rbegin(); it != m->children_.rend(); ++it)
      stack.emplace_back(prefix.empty() ? it->first : prefix + "." + it->first, it->second);
  }
  return out;
}

Tensor Module::find(const std::string& dotted_name) const {
  for (const auto& [n, t] : named_state())
    if (n == dotted_name) return t;
  throw IndexError((parent_ ? where() : type_name_) + ": no parameter or buffer named '" +
                   dotted_name + "'");
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::zero_grad(bool set_to_none) {
  for (auto& t : parameters()) {
    if (set_to_none) t.set_grad(Tensor());
    else t.zero_grad();
  }
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& t : parameters()) n += t.numel();
  return n;
}

void Module::check_index(size_t i, size_t n) const {
  if (i >= n)
    throw IndexError(where() + ": index " + std::to_string(i) + " out of range for " +
                     std::to_string(n) + " modules");
}

void Module::type_mismatch(size_t i, const Module& m) const {
  value_error("module " + std::to_string(i) + " is an nn::" + m.type_name() +
              ", not the type asked for");
}

void Module::move_child_and_renumber(size_t from, size_t to) {
  check_index(from, children_.size());
  check_index(to, children_.size());
  auto child = std::move(children_[from]);
  children_.erase(children_.begin() + static_cast<std::ptrdiff_t>(from));
  children_.insert(children_.begin() + static_cast<std::ptrdiff_t>(to), std::move(child));
  for (size_t i = 0; i < children_.size(); ++i) {
    children_[i].first = std::to_string(i);
    if (children_[i].second->parent_ == this) children_[i].second->name_ = children_[i].first;
  }
}

std::shared_ptr<Module> Module::clone() const {
  throw ValueError("clone() has not been implemented for " + type_name_ +
                   ". Subclass tg::nn::Cloneable<" + type_name_ +
                   "> instead of tg::nn::Module to inherit the ability to clone");
}

namespace impl {

void copy_module_state(const Module& from, Module& to, const std::string& who) {
  // Structure first, so a mismatch changes nothing.
  const auto src = from.named_state(), dst = to.named_state();
  auto fail = [&](const std::string& what) {
    throw ValueError(who + ": the module built afresh does not have the original's structure (" +
                     what + "); a module that adds parameters, buffers or submodules after its "
                     "constructor cannot be cloned this way");
  };
  if (src.size() != dst.size())
    fail(std::to_string(src.size()) + " parameters and buffers, the new one has " + std::to_string(dst.size()));
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i].first != dst[i].first) fail("'" + src[i].first + "' where the new one has '" + dst[i].first + "'");
    if (src[i].second.shape() != dst[i].second.shape())
      fail(src[i].first + " is " + to_string(src[i].second.shape()) + ", the new one's " +
           to_string(dst[i].second.shape()));
  }
  // Training flags, module by module, parents before children (as named_modules orders them).
  std::vector<std::pair<const Module*, Module*>> stack{{&from, &to}};
  std::vector<std::pair<const Module*, Module*>> pairs;
  while (!stack.empty()) {
    auto [a, b] = stack.back();
    stack.pop_back();
    if (a->children_.size() != b->children_.size()) fail("the submodules of " + a->where() + " differ");
    pairs.emplace_back(a, b);
    for (size_t i = 0; i < a->children_.size(); ++i)
      stack.emplace_back(a->children_[i].second.get(), b->children_[i].second.get());
  }
  NoGradGuard no_grad;  // values are copied as an optimizer writes them: in place, not recorded
  for (size_t i = 0; i < src.size(); ++i) {
    const Tensor& d = dst[i].second;
    d.copy_(src[i].second);
    if (d.is_leaf()) d.requires_grad_(src[i].second.requires_grad());
  }
  for (auto& [a, b] : pairs) b->training_ = a->training_;
}

Tensor forward_as_unary(Module& m, const Tensor& x) {
  auto* unary = dynamic_cast<UnaryModule*>(&m);
  if (!unary)
    throw ValueError(m.where() + ": called as a tensor -> tensor module, but an nn::" + m.type_name() +
                     " is not one (not derived from nn::UnaryModule); cast it to its type: "
                     "list->at<" + m.type_name() + ">(i)->forward(...)");
  return unary->forward(x);
}

void throw_empty_holder(const char* what) {
  throw ValueError(std::string("calling an empty module holder (") + what +
                   "): assign it a module first, e.g. from register_module");
}

}  // namespace impl

ModuleScope Module::scope() const {
  return ModuleScope(is_anomaly_enabled() ? where() : std::string());
}

std::string Module::where() const {
  const std::string sig = signature();
  const std::string kind = sig.empty() ? type_name_ : type_name_ + " " + sig;
  const std::string p = path();
  return p.empty() ? kind : p + " (" + kind + ")";
}

void Module::shape_error(const std::string& what) const { throw ShapeError(where() + ": " + what); }
void Module::value_error(const std::string& what) const { throw ValueError(where() + ": " + what); }

namespace {
std::string with_commas(int64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}
}  // namespace

void Module::repr_into(std::string& out, int indent) const {
  const std::string pad(static_cast<size_t>(indent), ' ');
  out += type_name_ + "(" + extra_repr();
  const bool has_body = !params_.empty() || !buffers_.empty() || !children_.empty();
  if (!has_body) {
    out += ")";
    return;
  }
  out += ")  # " + with_commas(num_parameters()) + " params\n";
  for (const auto& [n, t] : params_) out += pad + "  " + n + ": " + to_string(t.shape()) + "\n";
  for (const auto& [n, t] : buffers_)
    out += pad + "  " + n + ": " + to_string(t.shape()) + " (buffer)\n";
  for (const auto& [n, c] : children_) {
    out += pad + "  (" + n + "): ";
    c->repr_into(out, indent + 2);
    out += "\n";
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
}

std::string Module::repr() const {
  std::string out;
  repr_into(out, 0);
  return out + "\nTotal parameters: " + with_commas(num_parameters());
}

std::ostream& operator<<(std::ostream& os, const Module& m) { return os << m.repr(); }

}  // namespace nn
}  // namespace tg
