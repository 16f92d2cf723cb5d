// exp and the logistic function in plain float arithmetic with no branches or library calls, so
// the CPU loops over them vectorize (SSE2, AVX2, AVX-512, NEON alike); CUDA devices use expf.
// ExpNonPositive is exp on (−∞, 0] with relative error below 2e-7: Cody–Waite reduction
// x = n·ln2 + r, |r| ≤ ln2/2, and the degree-7 Taylor polynomial of e^r (remainder < 5e-9).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "stagecraft/kernels/hd.h"

namespace stagecraft::kernels {

SC_HD inline float ExpNonPositive(float x) {
#if defined(__CUDA_ARCH__)
  return expf(x);
#else
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;     // ln 2 in 16 bits: n·kLn2Hi is exact
  constexpr float kLn2Lo = 1.42860682030941723e-6f;  // ln 2 − kLn2Hi
  constexpr float kRound = 12582912.0f;              // 1.5·2^23: adding it rounds to an integer
  x = x > -87.0f ? x : -87.0f;                       // e^-87 is still a normal float
  const float n = (x * kLog2e + kRound) - kRound;    // nearest integer, in [-126, 0]
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n from its exponent bits.
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
#endif
}

// The logistic function σ(y) = 1 / (1 + e^−y) and 1 − σ(y) = σ(−y), both to a few ulp of their
// own size (neither is computed as 1 minus the other, so neither loses digits).
struct Logistic {
  float s;   // σ(y)
  float sc;  // 1 − σ(y)
};
SC_HD inline Logistic LogisticOf(float y) {
  const float e = ExpNonPositive(-fabsf(y));  // e^−|y| in (0, 1]
  const float a = 1.0f / (1.0f + e);          // σ(|y|)
  const float b = e * a;                      // 1 − σ(|y|)
  const bool positive = y >= 0.0f;            // selects, not branches: the loops stay vectorizable
  return Logistic{positive ? a : b, positive ? b : a};
}

}  // namespace stagecraft::kernels
