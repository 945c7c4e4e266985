#include "tapegrad/state_dict.h"

namespace tg {

namespace {
template <class Map>
const typename Map::mapped_type& lookup(const Map& m, const std::string& key,
                                        const std::string& owner, const char* kind) {
  auto it = m.find(key);
  if (it == m.end())
    throw CheckpointError(owner + ": state has no " + kind + " entry '" + key + "'");
  return it->second;
}
}  // namespace

const Tensor& StateDict::tensor_at(const std::string& key, const std::string& owner) const {
  return lookup(tensors, key, owner, "tensor");
}
double StateDict::number_at(const std::string& key, const std::string& owner) const {
  return lookup(numbers, key, owner, "number");
}
const std::string& StateDict::string_at(const std::string& key, const std::string& owner) const {
  return lookup(strings, key, owner, "string");
}

}  // namespace tg
