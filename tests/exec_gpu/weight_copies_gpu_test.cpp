// Tests for the cuda device's 16-bit weight copies (half_gemm_inputs.h) on a GPU: in bf16 and
// fp16, a GEMM reading a weight matrix inside a buffer that an optimizer updated reads the
// weights the buffer holds at that moment after every kind of write (an update in place or out
// of place, Fill, Upload, Copy, Axpy, a GEMM writing into it, a free and a reuse of its memory),
// checked against the exact product of the downloaded weights within the precision's bound; the
// copies are counted as memory in use and reused rather than allocated again; fp32 and tf32
// make none. Without a CUDA device every test skips.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "exec_gpu_test_util.h"
#include "stagecraft/exec/cuda_device.h"
#include "stagecraft/kernels/optimizer.h"

namespace stagecraft::exec {
namespace {

// c [m x n] = a [m x k] · wᵀ, w an [n x k] matrix kOffset floats into a buffer of kTotal (as a
// stage's weights sit in its parameter buffer; the odd offset puts the copy's matrix off any
// 16-byte boundary).
constexpr int kM = 37, kN = 53, kK = 29;
constexpr int64_t kOffset = 13, kTotal = kOffset + int64_t{kN} * kK + 7;

// The GEMM against the exact product of the weights at `w` now, within the bound of
// cuda_device_gpu_test.cpp: both inputs rounded to 16 bits (2u) plus fp32 sums over k terms.
void ExpectGemmReadsTheWeightsNow(Device& gpu, GemmPrecision precision, const float* a, const float* w, float* c,
                                  const char* when) {
  SCOPED_TRACE(when);
  gpu.ops().linear.gemm(gpu.op_context(), false, true, kM, kN, kK, 1.0f, a, w, 0.0f, c);
  std::vector<float> a_host(static_cast<size_t>(kM) * kK), w_host(static_cast<size_t>(kN) * kK);
  std::vector<float> c_host(static_cast<size_t>(kM) * kN);
  gpu.memory().Download(c_host.data(), c, static_cast<int64_t>(c_host.size()));
  gpu.memory().Download(a_host.data(), a, static_cast<int64_t>(a_host.size()));
  gpu.memory().Download(w_host.data(), w, static_cast<int64_t>(w_host.size()));
  const double u = std::ldexp(1.0, precision == GemmPrecision::kBf16 ? -9 : -11);
  int bad = 0;
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) {
      double exact = 0, magnitude = 0;
      for (int l = 0; l < kK; ++l) {
        const double term = static_cast<double>(a_host[i * kK + l]) * w_host[j * kK + l];
        exact += term;
        magnitude += std::abs(term);
      }
      const double bound = 2 * (2 * u + (kK + 2) * std::ldexp(1.0, -24)) * magnitude + 1e-30;
      if (!(std::abs(c_host[i * kN + j] - exact) <= bound) && ++bad <= 3) {
        ADD_FAILURE() << "c[" << i << "][" << j << "] = " << c_host[i * kN + j] << ", exact " << exact << ", bound "
                      << bound;
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(CudaWeightCopiesGpuTest, GemmsReadTheWeightsAsTheyAreAfterEveryKindOfWrite) {
  SKIP_WITHOUT_GPU();
  for (const GemmPrecision precision : {GemmPrecision::kBf16, GemmPrecision::kFp16}) {
    SCOPED_TRACE(precision == GemmPrecision::kBf16 ? "bf16" : "fp16");
    auto gpu = MakeCudaDevice(0, precision);
    float* a = OnDevice(*gpu, Random(static_cast<size_t>(kM) * kK, 1));
    float* c = OnDevice(*gpu, std::vector<float>(static_cast<size_t>(kM) * kN));
    float* params = OnDevice(*gpu, Random(kTotal, 2));
    float* velocity = OnDevice(*gpu, std::vector<float>(kTotal, 0.0f));
    float* w = params + kOffset;
    ExpectGemmReadsTheWeightsNow(*gpu, precision, a, w, c, "uploaded, never updated: rounded at each GEMM");
    ExpectGemmReadsTheWeightsNow(*gpu, precision, a, w, c, "twice");  // warms the workspace

    const int64_t in_use = gpu->memory().bytes_in_use();
    float* grad = OnDevice(*gpu, Random(kTotal, 3));
    gpu->ops().optimizer.sgd_momentum(gpu->op_context(), kTotal, params, params, velocity, grad, 1.0f, 0.5f, 0.9f);
    ExpectGemmReadsTheWeightsNow(*gpu, precision, a, w, c, "after an update in place (the copy is made)");
    EXPECT_EQ(gpu->memory().bytes_in_use() - in_use, kTotal * 4 + kTotal * 2) << "grad, and the 16-bit copy";
    const int64_t allocations = gpu->memory().system_allocations();
    gpu->memory().Upload(grad, Random(kTotal, 4).data(), kTotal);
    gpu->ops().optimizer.sgd_momentum(gpu->op_context(), kTotal, params, params, velocity, grad, 1.0f, 0.5f, 0.9f);
    ExpectGemmReadsTheWeightsNow(*gpu, precision, a, w, c, "after a second update (the copy refreshed)");
    EXPECT_EQ(gpu->memory().system_allocations(), allocations) << "the copy is refreshed in place";

    gpu->memory().Fill(w + 100, 0.25f, 3);
    ExpectGemmReadsTheWeightsNow(*gpu, precision, a, w, c, "after a Fill of 3 weights");
    gpu->memory().Upload(params, Random(kTotal, 5).data(), kTotal);
    ExpectGemmReadsTheWeightsNow(*gpu, precision, a, w, c, "after an Upload");
    float* other = OnDevice(*gpu, Random(kTotal, 6));
    gpu->memory().Copy(w, other, int64_t{kN} * kK);
    ExpectGemmReadsTheWeightsNow(*gpu, precision, a, w, c, "after a Copy into the matrix");
    gpu->ops().linear.axpy(gpu->op_context(), kTotal, 0.5f, other, params);
    ExpectGemmReadsTheWeightsNow(*gpu, precision, a, w, c, "after an Axpy");
    // A GEMM writing into the buffer: its first kM x kM floats ← 0.5 · a · aᵀ + themselves.
    gpu->ops().linear.gemm(gpu->op_context(), false, true, kM, kM, kK, 0.5f, a, a, 1.0f, params);
    ExpectGemmReadsTheWeightsNow(*gpu, precision, a, w, c, "after a GEMM wrote into the buffer");

    // Out of place (the next version in a buffer of its own): both versions read as they are.
    float* next = gpu->memory().Allocate(kTotal);
    kernels::AdamParams adam;
    adam.bias1 = 1.0f - adam.beta1;
    adam.bias2 = 1.0f - adam.beta2;
    float* m = OnDevice(*gpu, std::vector<float>(kTotal, 0.0f));
    float* v = OnDevice(*gpu, std::vector<float>(kTotal, 0.0f));
    gpu->memory().Upload(grad, Random(kTotal, 7).data(), kTotal);
    gpu->ops().optimizer.adam(gpu->op_context(), kTotal, params, next, m, v, grad, 1.0f, adam);
    ExpectGemmReadsTheWeightsNow(*gpu, precision, a, next + kOffset, c, "the new version, out of place");
    ExpectGemmReadsTheWeightsNow(*gpu, precision, a, w, c, "the old version, still there");

    // Freed and handed out again (the pool gives the same block back): no copy survives it.
    const int64_t before_free = gpu->memory().bytes_in_use();
    gpu->memory().Free(next, kTotal);
    EXPECT_EQ(before_free - gpu->memory().bytes_in_use(), kTotal * 4 + kTotal * 2) << "the copy goes with its buffer";
    float* again = gpu->memory().Allocate(kTotal);
    EXPECT_EQ(again, next) << "the pool's block of that size";
    gpu->memory().Upload(again, Random(kTotal, 8).data(), kTotal);
    ExpectGemmReadsTheWeightsNow(*gpu, precision, a, again + kOffset, c, "the block reused, never updated");
    const int64_t reused = gpu->memory().system_allocations();
    gpu->memory().Upload(grad, Random(kTotal, 9).data(), kTotal);
    gpu->ops().optimizer.sgd_momentum(gpu->op_context(), kTotal, again, again, velocity, grad, 1.0f, 0.5f, 0.9f);
    EXPECT_EQ(gpu->memory().system_allocations(), reused) << "the freed copy's memory serves the new one";
    ExpectGemmReadsTheWeightsNow(*gpu, precision, a, again + kOffset, c, "the block reused, updated");

    for (float* buffer : {a, c, params, velocity, grad, other, m, v, again}) {
      gpu->memory().Free(buffer, buffer == a ? int64_t{kM} * kK : buffer == c ? int64_t{kM} * kN : kTotal);
    }
    gpu->memory().ReleaseCached();
  }
}

TEST(CudaWeightCopiesGpuTest, Fp32AndTf32MakeNoCopies) {
  SKIP_WITHOUT_GPU();
  for (const GemmPrecision precision : {GemmPrecision::kFp32, GemmPrecision::kTf32}) {
    auto gpu = MakeCudaDevice(0, precision);
    float* params = OnDevice(*gpu, Random(kTotal, 2));
    float* velocity = OnDevice(*gpu, std::vector<float>(kTotal, 0.0f));
    float* grad = OnDevice(*gpu, Random(kTotal, 3));
    const int64_t in_use = gpu->memory().bytes_in_use();
    gpu->ops().optimizer.sgd_momentum(gpu->op_context(), kTotal, params, params, velocity, grad, 1.0f, 0.5f, 0.9f);
    gpu->streams().Synchronize();
    EXPECT_EQ(gpu->memory().bytes_in_use(), in_use);
    for (float* buffer : {params, velocity, grad}) gpu->memory().Free(buffer, kTotal);
  }
}

}  // namespace
}  // namespace stagecraft::exec
