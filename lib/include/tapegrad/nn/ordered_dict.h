#pragma once
// tg::nn::OrderedDict<V>: what named_parameters(), named_buffers(), named_children(),
// named_modules() and state_dict() return: (name, value) items in registration order that
// you can also look a name up in.
//
//   auto params = model->named_parameters();
//   params["fc1.weight"]                      // tg::IndexError if there is none
//   params.contains("fc1.bias")   params.find("fc1.bias")   // a pointer, or nullptr
//   for (const auto& [name, p] : params) ...  // items are pairs: .first/.second,
//                                             // or LibTorch's .key()/.value()
#include <cstddef>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tapegrad/error.h"

namespace tg {
namespace nn {

template <class V>
class OrderedDict {
 public:
  /// A (key, value) pair with LibTorch's accessors.
  struct Item : std::pair<std::string, V> {
    using std::pair<std::string, V>::pair;
    const std::string& key() const { return this->first; }
    V& value() { return this->second; }
    const V& value() const { return this->second; }
  };

  /// `key_description` names the values in errors: "Parameter 'fc3.weight' is not defined".
  explicit OrderedDict(std::string key_description = "Key")
      : key_description_(std::move(key_description)) {}

  /// Appends; tg::ValueError if the key is already there.
  V& insert(std::string key, V value) {
    if (index_.count(key)) throw ValueError(key_description_ + " '" + key + "' already defined");
    index_.emplace(key, items_.size());
    items_.emplace_back(std::move(key), std::move(value));
    return items_.back().second;
  }

  /// The value under `key`; tg::IndexError if there is none.
  V& operator[](const std::string& key) { return at(key); }
  const V& operator[](const std::string& key) const { return at(key); }
  V& at(const std::string& key) { return const_cast<V&>(static_cast<const OrderedDict&>(*this).at(key)); }
  const V& at(const std::string& key) const {
    const V* v = find(key);
    if (!v) throw IndexError(key_description_ + " '" + key + "' is not defined");
    return *v;
  }
  /// The i-th item, in order; tg::IndexError if out of range.
  Item& operator[](size_t i) { return items_.at(check(i)); }
  const Item& operator[](size_t i) const { return items_.at(check(i)); }

  /// A pointer to the value under `key`, or nullptr.
  V* find(const std::string& key) { return const_cast<V*>(static_cast<const OrderedDict&>(*this).find(key)); }
  const V* find(const std::string& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  bool contains(const std::string& key) const { return index_.count(key) != 0; }

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  auto begin() { return items_.begin(); }
  auto end() { return items_.end(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }
  const std::vector<Item>& items() const { return items_; }
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    for (const auto& it : items_) out.push_back(it.first);
    return out;
  }
  std::vector<V> values() const {
    std::vector<V> out;
    for (const auto& it : items_) out.push_back(it.second);
    return out;
  }
  /// As plain pairs (what checkpoint and npz functions take).
  operator std::vector<std::pair<std::string, V>>() const {  // NOLINT: implicit on purpose
    return {items_.begin(), items_.end()};
  }

 private:
  size_t check(size_t i) const {
    if (i >= items_.size())
      throw IndexError(key_description_ + " index " + std::to_string(i) + " out of range for " +
                       std::to_string(items_.size()) + " items");
    return i;
  }

  std::string key_description_;
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace nn
}  // namespace tg
