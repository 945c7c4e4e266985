// tg::nn::Module: registration, traversal, modes and the printable tree.
#include <ostream>

#include "tapegrad/nn/module.h"

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

namespace {
template <class Pick>
void collect(const Module& m, const std::string& prefix, bool recurse, Pick pick,
             std::vector<std::pair<std::string, Tensor>>& out) {
  for (const auto& [name, t] : pick(m)) out.emplace_back(prefix + name, t);
  if (!recurse) return;
  for (const auto& [name, c] : m.named_children()) collect(*c, prefix + name + ".", true, pick, out);
}
}  // namespace

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect(*this, "", recurse, [](const Module& m) -> const auto& { return m.params_; }, out);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect(*this, "", recurse, [](const Module& m) -> const auto& { return m.buffers_; }, out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_state() const {
  auto out = named_parameters();
  for (auto& b : named_buffers()) out.push_back(b);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [n, c] : children_) out.push_back(c);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> stack{{"", shared_from_this()}};
  while (!stack.empty()) {
    auto [prefix, m] = stack.back();
    stack.pop_back();
    out.emplace_back(prefix, m);
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
