#pragma once
// Loading the PyTorch reference values committed under tests/fixtures (written by the scripts in
// tests/reference/), and comparing tensors with them.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <xtensor/xnpy.hpp>

#include "tapegrad/tapegrad.h"
#include "tapegrad/xtensor.h"

namespace ref {

inline std::string path(const std::string& rel) { return std::string(TAPEGRAD_TEST_DATA) + "/" + rel; }

/// A float32 .npy file as a tensor (copied to row-major).
inline tg::Tensor load(const std::string& rel, bool requires_grad = false) {
  tg::Array a = xt::load_npy<float>(path(rel));
  return tg::from_array(tg::Array(a), requires_grad);
}

/// An int64 .npy file as indices.
inline tg::Indices load_indices(const std::string& rel) {
  auto a = xt::load_npy<int64_t>(path(rel));
  return tg::Indices(std::vector<int64_t>(a.begin(), a.end()),
                     tg::Shape(a.shape().begin(), a.shape().end()));
}

/// An int64 .npy file as an int64 tensor.
inline tg::Tensor load_int64(const std::string& rel) {
  const tg::Indices i = load_indices(rel);
  return tg::tensor(i.values, i.shape);
}

/// An int64 .npy file of 0/1 (how tests/reference/make_dtype.py saves bool tensors) as a bool
/// tensor.
inline tg::Tensor load_bool(const std::string& rel) { return load_int64(rel).to(tg::kBool); }

/// Same dtype, same shape and equal elements (int64 and bool tensors).
inline ::testing::AssertionResult equal(const tg::Tensor& actual, const tg::Tensor& expected) {
  if (!actual.defined()) return ::testing::AssertionFailure() << "actual tensor is undefined";
  if (actual.dtype() != expected.dtype())
    return ::testing::AssertionFailure() << "dtype " << tg::to_string(actual.dtype()) << " vs expected "
                                         << tg::to_string(expected.dtype());
  if (actual.shape() != expected.shape())
    return ::testing::AssertionFailure() << "shape " << tg::to_string(actual.shape())
                                         << " vs expected " << tg::to_string(expected.shape());
  const auto a = actual.to_vector<int64_t>(), e = expected.to_vector<int64_t>();
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != e[i])
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs expected " << e[i];
  return ::testing::AssertionSuccess();
}

/// Same shape, and every element within atol + rtol·|expected|.
inline ::testing::AssertionResult close(const tg::Tensor& actual, const tg::Tensor& expected,
                                        double atol = 1e-5, double rtol = 1e-5) {
  if (!actual.defined()) return ::testing::AssertionFailure() << "actual tensor is undefined";
  if (actual.shape() != expected.shape())
    return ::testing::AssertionFailure() << "shape " << tg::to_string(actual.shape())
                                         << " vs expected " << tg::to_string(expected.shape());
  const auto a = actual.to_vector(), e = expected.to_vector();
  for (size_t i = 0; i < a.size(); ++i) {
    const bool both_nan = std::isnan(a[i]) && std::isnan(e[i]);
    if (!both_nan && !(std::abs(a[i] - e[i]) <= atol + rtol * std::abs(e[i])))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << a[i] << " vs expected " << e[i];
  }
  return ::testing::AssertionSuccess();
}

}  // namespace ref
