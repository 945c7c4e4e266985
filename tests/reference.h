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
