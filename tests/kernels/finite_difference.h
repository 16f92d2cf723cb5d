// Central differences, the kernels tests' oracle for gradients: d f / d x_i at x, one
// coordinate at a time, with f evaluated in double.
#pragma once

#include <vector>

namespace stagecraft::kernels::testing {

template <typename Fn>
std::vector<double> CentralDifferences(std::vector<double> at, Fn f) {
  constexpr double kStep = 1e-6;
  std::vector<double> grad(at.size());
  for (size_t i = 0; i < at.size(); ++i) {
    const double x = at[i];
    at[i] = x + kStep;
    const double up = f(at);
    at[i] = x - kStep;
    const double down = f(at);
    at[i] = x;
    grad[i] = (up - down) / (2 * kStep);
  }
  return grad;
}

}  // namespace stagecraft::kernels::testing
