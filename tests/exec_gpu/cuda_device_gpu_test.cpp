// Tests for the cuda device (exec/cuda_device.h) on a GPU: its GEMMs against BLAS (the cpu
// device) and against a double-precision product for every dtype and pair of transposes, within
// the rounding bound of each precision; memory accounting and the pool (blocks kept by size over
// a stream-ordered memory pool that keeps what is freed, and Reserve growing it); op stamps on the
// host clock, and Reached asking for one without waiting; and a failing call's message. Without a
// CUDA device every test skips with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "exec_gpu_test_util.h"
#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/cuda_device.h"

namespace stagecraft::exec {
namespace {

// c = alpha · op(a) · op(b) + beta · c on `device`, returned to the host.
std::vector<float> RunGemm(Device& device, bool ta, bool tb, int m, int n, int k, float alpha, float beta,
                           const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c0) {
  float* da = OnDevice(device, a);
  float* db = OnDevice(device, b);
  float* dc = OnDevice(device, c0);
  device.ops().linear.gemm(device.op_context(), ta, tb, m, n, k, alpha, da, db, beta, dc);
  std::vector<float> c(c0.size());
  device.memory().Download(c.data(), dc, static_cast<int64_t>(c.size()));
  device.memory().Free(da, static_cast<int64_t>(a.size()));
  device.memory().Free(db, static_cast<int64_t>(b.size()));
  device.memory().Free(dc, static_cast<int64_t>(c0.size()));
  return c;
}

// Relative rounding of a GEMM input in each precision: tf32 keeps 10 mantissa bits (2^-10 when
// the tensor cores truncate), bf16 7 (2^-8 truncated, 2^-9 rounded: the device rounds), fp16 10.
double InputRoundoff(GemmPrecision p) {
  switch (p) {
    case GemmPrecision::kFp32: return 0;
    case GemmPrecision::kTf32: return std::ldexp(1.0, -10);
    case GemmPrecision::kBf16: return std::ldexp(1.0, -9);
    case GemmPrecision::kFp16: return std::ldexp(1.0, -11);
  }
  return 1;
}

struct Shape {
  int m, n, k;
};

// Names one GEMM case of the loops below, for a failure's trace.
std::string GemmCase(Device& gpu, GemmPrecision precision, const Shape& s, bool ta, bool tb, float beta) {
  return gpu.Name() + " precision " + std::to_string(static_cast<int>(precision)) + " " + std::to_string(s.m) + "x" +
         std::to_string(s.n) + "x" + std::to_string(s.k) + (ta ? " aT" : "") + (tb ? " bT" : "") + " beta " +
         std::to_string(beta);
}

TEST(CudaDeviceGpuTest, GemmMatchesBlasAndTheExactProductForEveryDtypeAndTranspose) {
  SKIP_WITHOUT_GPU();
  auto cpu = MakeCpuDevice();
  for (const GemmPrecision precision :
       {GemmPrecision::kFp32, GemmPrecision::kTf32, GemmPrecision::kBf16, GemmPrecision::kFp16}) {
    auto gpu = MakeCudaDevice(0, precision);
    const double u = InputRoundoff(precision);
    for (const Shape s : {Shape{1, 1, 1}, Shape{37, 53, 29}, Shape{128, 256, 64}, Shape{64, 512, 512}}) {
      for (const bool ta : {false, true}) {
        for (const bool tb : {false, true}) {
          for (const float beta : {0.0f, 1.0f}) {
            SCOPED_TRACE(GemmCase(*gpu, precision, s, ta, tb, beta));
            const std::vector<float> a = Random(static_cast<size_t>(s.m) * s.k, 1);
            const std::vector<float> b = Random(static_cast<size_t>(s.k) * s.n, 2);
            const std::vector<float> c0 = Random(static_cast<size_t>(s.m) * s.n, 3);
            const float alpha = 0.75f;
            const std::vector<float> got = RunGemm(*gpu, ta, tb, s.m, s.n, s.k, alpha, beta, a, b, c0);
            const std::vector<float> blas = RunGemm(*cpu, ta, tb, s.m, s.n, s.k, alpha, beta, a, b, c0);
            int bad = 0;
            for (int i = 0; i < s.m; ++i) {
              for (int j = 0; j < s.n; ++j) {
                double exact = 0, magnitude = 0;
                for (int l = 0; l < s.k; ++l) {
                  const double av = ta ? a[static_cast<size_t>(l) * s.m + i] : a[static_cast<size_t>(i) * s.k + l];
                  const double bv = tb ? b[static_cast<size_t>(j) * s.k + l] : b[static_cast<size_t>(l) * s.n + j];
                  exact += alpha * av * bv;
                  magnitude += std::abs(alpha * av * bv);
                }
                const size_t at = static_cast<size_t>(i) * s.n + j;
                exact += beta * c0[at];
                magnitude += std::abs(beta * c0[at]);
                // Both inputs rounded (2u) plus fp32 sums over k terms, with a factor 2 of slack.
                const double bound = 2 * (2 * u + (s.k + 2) * std::ldexp(1.0, -24)) * magnitude + 1e-30;
                if (std::abs(got[at] - exact) > bound && ++bad <= 3) {
                  ADD_FAILURE() << "c[" << i << "][" << j << "] = " << got[at] << ", exact " << exact << ", bound " << bound;
                }
                // BLAS keeps the fp32 bound; the GPU in fp32 must agree with it to that bound too.
                EXPECT_LE(std::abs(blas[at] - exact), 2 * (s.k + 2) * std::ldexp(1.0, -24) * magnitude + 1e-30);
                if (precision == GemmPrecision::kFp32) {
                  EXPECT_LE(std::abs(got[at] - blas[at]), 4 * (s.k + 2) * std::ldexp(1.0, -24) * magnitude + 1e-30);
                }
              }
            }
            EXPECT_EQ(bad, 0);
          }
        }
      }
    }
  }
}

// Batched GEMMs with every stride beyond its matrix: the gaps of a and b hold NaN (read by
// neither device) and those of c a sentinel that must survive. Each matrix is checked as Gemm's
// are: against the exact product within the precision's bound, and in fp32 against the cpu
// device's Gemm run matrix by matrix.
TEST(CudaDeviceGpuTest, GemmBatchedWithGappedStridesMatchesALoopOfBlasGemmsForEveryDtype) {
  SKIP_WITHOUT_GPU();
  auto cpu = MakeCpuDevice();
  constexpr int kBatch = 3;
  constexpr float kSentinel = 7.0f;
  for (const GemmPrecision precision :
       {GemmPrecision::kFp32, GemmPrecision::kTf32, GemmPrecision::kBf16, GemmPrecision::kFp16}) {
    auto gpu = MakeCudaDevice(0, precision);
    const double u = InputRoundoff(precision);
    for (const Shape s : {Shape{1, 1, 1}, Shape{13, 5, 13}, Shape{37, 53, 29}}) {
      const int64_t a_size = static_cast<int64_t>(s.m) * s.k, b_size = static_cast<int64_t>(s.k) * s.n;
      const int64_t c_size = static_cast<int64_t>(s.m) * s.n;
      const int64_t stride_a = a_size + 5, stride_b = b_size + 11, stride_c = c_size + 3;
      for (const bool ta : {false, true}) {
        for (const bool tb : {false, true}) {
          for (const float beta : {0.0f, 1.0f}) {
            SCOPED_TRACE(GemmCase(*gpu, precision, s, ta, tb, beta));
            // Each tensor spans kBatch strides; matrix i starts at i·stride, the rest is gap.
            std::vector<float> a(static_cast<size_t>(kBatch * stride_a), std::nanf(""));
            std::vector<float> b(static_cast<size_t>(kBatch * stride_b), std::nanf(""));
            std::vector<float> c0(static_cast<size_t>(kBatch * stride_c), kSentinel);
            for (int i = 0; i < kBatch; ++i) {
              const std::vector<float> ai = Random(static_cast<size_t>(a_size), 10 + i);
              const std::vector<float> bi = Random(static_cast<size_t>(b_size), 20 + i);
              const std::vector<float> ci = Random(static_cast<size_t>(c_size), 30 + i);
              std::copy(ai.begin(), ai.end(), a.begin() + i * stride_a);
              std::copy(bi.begin(), bi.end(), b.begin() + i * stride_b);
              std::copy(ci.begin(), ci.end(), c0.begin() + i * stride_c);
            }
            const float alpha = 0.75f;
            float* da = OnDevice(*gpu, a);
            float* db = OnDevice(*gpu, b);
            float* dc = OnDevice(*gpu, c0);
            gpu->ops().linear.gemm_batched(gpu->op_context(), ta, tb, s.m, s.n, s.k, alpha, da, stride_a, db, stride_b,
                                           beta, dc, stride_c, kBatch);
            std::vector<float> got(c0.size());
            gpu->memory().Download(got.data(), dc, static_cast<int64_t>(got.size()));
            gpu->memory().Free(da, static_cast<int64_t>(a.size()));
            gpu->memory().Free(db, static_cast<int64_t>(b.size()));
            gpu->memory().Free(dc, static_cast<int64_t>(c0.size()));
            std::vector<float> blas = c0;
            for (int i = 0; i < kBatch; ++i) {
              cpu->ops().linear.gemm(cpu->op_context(), ta, tb, s.m, s.n, s.k, alpha, a.data() + i * stride_a,
                                     b.data() + i * stride_b, beta, blas.data() + i * stride_c);
            }
            int bad = 0;
            for (int i = 0; i < kBatch; ++i) {
              const float* ai = a.data() + i * stride_a;
              const float* bi = b.data() + i * stride_b;
              for (int r = 0; r < s.m; ++r) {
                for (int col = 0; col < s.n; ++col) {
                  double exact = 0, magnitude = 0;
                  for (int l = 0; l < s.k; ++l) {
                    const size_t a_at = ta ? static_cast<size_t>(l) * s.m + r : static_cast<size_t>(r) * s.k + l;
                    const size_t b_at = tb ? static_cast<size_t>(col) * s.k + l : static_cast<size_t>(l) * s.n + col;
                    const double av = ai[a_at], bv = bi[b_at];
                    exact += alpha * av * bv;
                    magnitude += std::abs(alpha * av * bv);
                  }
                  const size_t at = static_cast<size_t>(i * stride_c) + static_cast<size_t>(r) * s.n + col;
                  exact += beta * c0[at];
                  magnitude += std::abs(beta * c0[at]);
                  // Gemm's bounds: both inputs rounded (2u) plus fp32 sums over k terms, a factor 2 of slack.
                  const double bound = 2 * (2 * u + (s.k + 2) * std::ldexp(1.0, -24)) * magnitude + 1e-30;
                  if (!(std::abs(got[at] - exact) <= bound) && ++bad <= 3) {
                    ADD_FAILURE() << "c" << i << "[" << r << "][" << col << "] = " << got[at] << ", exact " << exact
                                  << ", bound " << bound;
                  }
                  EXPECT_LE(std::abs(blas[at] - exact), 2 * (s.k + 2) * std::ldexp(1.0, -24) * magnitude + 1e-30);
                  if (precision == GemmPrecision::kFp32) {
                    EXPECT_LE(std::abs(got[at] - blas[at]), 4 * (s.k + 2) * std::ldexp(1.0, -24) * magnitude + 1e-30);
                  }
                }
              }
              // The gap after each output matrix is left as it was.
              for (int64_t g = c_size; g < stride_c; ++g) {
                EXPECT_EQ(got[static_cast<size_t>(i * stride_c + g)], kSentinel) << "gap of c" << i;
              }
            }
            EXPECT_EQ(bad, 0);
          }
        }
      }
    }
  }
}

TEST(CudaDeviceGpuTest, GemmBatchedRejectsOverlappingOutputsAndNegativeStrides) {
  SKIP_WITHOUT_GPU();
  auto gpu = MakeCudaDevice(0, GemmPrecision::kFp32);
  float* x = gpu->memory().Allocate(64);
  EXPECT_THROW(
      gpu->ops().linear.gemm_batched(gpu->op_context(), false, false, 2, 2, 2, 1.0f, x, 4, x, 4, 0.0f, x, 3, 2),
      std::invalid_argument);
  EXPECT_THROW(
      gpu->ops().linear.gemm_batched(gpu->op_context(), false, false, 2, 2, 2, 1.0f, x, -4, x, 4, 0.0f, x, 4, 2),
      std::invalid_argument);
  EXPECT_THROW(
      gpu->ops().linear.gemm_batched(gpu->op_context(), false, false, 2, 2, 2, 1.0f, x, 4, x, 4, 0.0f, x, 4, -1),
      std::invalid_argument);
  EXPECT_NO_THROW(gpu->ops().linear.gemm_batched(gpu->op_context(), false, false, 2, 2, 2, 1.0f, x, 4, x, 4, 0.0f, x, 4,
                                                 0));  // nothing to do
  gpu->streams().Synchronize();
  gpu->memory().Free(x, 64);
}

// The transformer's ops through the Device interface: the cuda device against the cpu device on
// the same inputs (the launchers' own tests compare the math closely; this checks each override
// hands its arguments on in order).
// The fused linear layer (cuBLASLt's epilogues where cuda_plan.h plans them, the unfused ops
// where not) against the cpu device's unfused ops, in every precision: GELU without a residual
// at widths 64 and 3072 (fused), with a residual, ReLU and a width of 12 (unfused); the weight
// gradient written and accumulated (the bias gradient through cuBLASLt's scratch); the input
// gradient through the activation before the layer (pre, [rows x in]; fused for GELU at input
// widths that are multiples of 8: every case here but ReLU's). Inputs in
// [-1, 1]: each product's error within twice the inputs' rounding times k, beside fp32's own;
// the output's GELU within 1e-3 relative (cuBLASLt's epilogue may use a faster tanh). In bf16
// the GELU cases without a residual must have run fused (CudaFusedCalls: five calls each); the
// other precisions say whether theirs did.
TEST(CudaDeviceGpuTest, FusedLinearMatchesTheCpuDeviceInEveryPrecision) {
  SKIP_WITHOUT_GPU();
  auto cpu = MakeCpuDevice();
  struct Case {
    kernels::Activation act;
    bool residual;
    int rows, out, in;
  };
  const Case cases[] = {{kernels::Activation::kGelu, false, 48, 64, 32},
                        {kernels::Activation::kGelu, false, 256, 3072, 768},
                        {kernels::Activation::kGelu, true, 48, 64, 32},
                        {kernels::Activation::kRelu, false, 48, 64, 32},
                        {kernels::Activation::kGelu, false, 48, 12, 32}};
  for (const GemmPrecision precision : {GemmPrecision::kFp32, GemmPrecision::kTf32, GemmPrecision::kBf16}) {
    auto gpu = MakeCudaDevice(0, precision);
    for (const Case& c : cases) {
      SCOPED_TRACE(gpu->Name() + " precision " + std::to_string(static_cast<int>(precision)) + " out " +
                   std::to_string(c.out) + (c.residual ? " residual" : "") +
                   (c.act == kernels::Activation::kRelu ? " relu" : " gelu"));
      const size_t nx = static_cast<size_t>(c.rows) * c.in, nw = static_cast<size_t>(c.out) * c.in,
                   ny = static_cast<size_t>(c.rows) * c.out;
      const std::vector<float> x = Random(nx, 60), w = Random(nw, 61), bias = Random(c.out, 62), res = Random(ny, 63);
      const std::vector<float> dz = Random(ny, 64), dw0 = Random(nw, 65), db0 = Random(c.out, 66), pre = Random(nx, 67);
      // Every tensor back from `device` after the forward and both weight gradients.
      auto run = [&](Device& d) {
        std::vector<float*> t = {OnDevice(d, x), OnDevice(d, w), OnDevice(d, bias), OnDevice(d, res),
                                 OnDevice(d, std::vector<float>(ny)), OnDevice(d, std::vector<float>(ny)),
                                 OnDevice(d, dz), OnDevice(d, dw0), OnDevice(d, db0),
                                 OnDevice(d, std::vector<float>(nw)), OnDevice(d, std::vector<float>(c.out)),
                                 OnDevice(d, pre), OnDevice(d, std::vector<float>(nx)), OnDevice(d, std::vector<float>(ny))};
        d.ops().fused_linear.forward(d.op_context(), c.act, c.rows, c.out, c.in, t[0], t[1], t[2],
                                     c.residual ? t[3] : nullptr, t[4], t[5]);
        d.ops().fused_linear.weight_grad(d.op_context(), c.rows, c.out, c.in, t[6], t[0], t[7], t[8], true);
        d.ops().fused_linear.weight_grad(d.op_context(), c.rows, c.out, c.in, t[6], t[0], t[9], t[10], false);
        d.ops().fused_linear.input_grad(d.op_context(), c.act, c.rows, c.out, c.in, t[6], t[1], t[11], t[12]);
        d.ops().fused_linear.forward_bias(d.op_context(), c.rows, c.out, c.in, t[0], t[1], t[2],
                                          c.residual ? t[3] : nullptr, t[13]);
        std::vector<std::vector<float>> back;
        const size_t out = static_cast<size_t>(c.out);
        const size_t sizes[] = {nx, nw, out, ny, ny, ny, ny, nw, out, nw, out, nx, nx, ny};
        for (size_t i = 0; i < t.size(); ++i) {
          back.emplace_back(sizes[i]);
          d.memory().Download(back.back().data(), t[i], static_cast<int64_t>(sizes[i]));
          d.memory().Free(t[i], static_cast<int64_t>(sizes[i]));
        }
        return back;
      };
      const int64_t fused_before = CudaFusedCalls(*gpu);
      const std::vector<std::vector<float>> want = run(*cpu), got = run(*gpu);
      const int64_t fused = CudaFusedCalls(*gpu) - fused_before;
      std::cout << "fused calls: " << fused << "\n";
      if (precision == GemmPrecision::kBf16 && c.act == kernels::Activation::kGelu && !c.residual && c.out % 8 == 0) {
        EXPECT_EQ(fused, 5);  // forward, input gradient, forward without activation, both weight gradients
      }
      const double u = InputRoundoff(precision);
      const char* names[] = {"x", "w", "bias", "residual", "z", "out", "dz", "dw accumulated", "dbias accumulated",
                             "dw", "dbias", "pre", "d (input gradient)", "y (no activation)"};
      for (const size_t i : {4, 5, 7, 8, 9, 10, 12, 13}) {
        const int k = i == 4 || i == 5 || i == 13 ? c.in : i == 12 ? c.out : c.rows;  // the products' inner dimension
        for (size_t j = 0; j < want[i].size(); ++j) {
          const double epilogue = i == 5 ? 1e-3 * (1 + std::abs(want[i][j])) : 0.0;
          ASSERT_NEAR(got[i][j], want[i][j], std::max(1e-4 * (1 + std::abs(want[i][j])), epilogue) + 2 * u * k)
              << names[i] << " [" << j << "]";
        }
      }
    }
  }
}

TEST(CudaDeviceGpuTest, TransformerOpsMatchTheCpuDevice) {
  SKIP_WITHOUT_GPU();
  auto cpu = MakeCpuDevice();
  auto gpu = MakeCudaDevice(0, GemmPrecision::kFp32);
  constexpr int kBatch = 2, kSeq = 5, kHeads = 3, kHeadDim = 4, kCols = kHeads * kHeadDim, kVocab = 7;
  constexpr int kRows = kBatch * kSeq;
  // Runs `op` on both devices with the same inputs and compares every tensor afterwards.
  auto run_both = [&](const char* what, std::vector<std::vector<float>> tensors, float tol,
                      const std::function<void(Device&, std::vector<float*>&)>& op) {
    SCOPED_TRACE(what);
    std::vector<std::vector<float>> results[2];
    Device* devices[2] = {cpu.get(), gpu.get()};
    for (int d = 0; d < 2; ++d) {
      std::vector<float*> ptrs;
      for (const std::vector<float>& t : tensors) {
        ptrs.push_back(OnDevice(*devices[d], t));
      }
      op(*devices[d], ptrs);
      for (size_t i = 0; i < tensors.size(); ++i) {
        std::vector<float> back(tensors[i].size());
        devices[d]->memory().Download(back.data(), ptrs[i], static_cast<int64_t>(back.size()));
        devices[d]->memory().Free(ptrs[i], static_cast<int64_t>(back.size()));
        results[d].push_back(std::move(back));
      }
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
      for (size_t j = 0; j < tensors[i].size(); ++j) {
        ASSERT_NEAR(results[1][i][j], results[0][i][j], tol + 1e-5f * std::abs(results[0][i][j]))
            << "tensor " << i << " [" << j << "]";
      }
    }
  };
  const size_t n = static_cast<size_t>(kRows) * kCols;
  std::vector<float> tokens(kRows);
  for (int i = 0; i < kRows; ++i) tokens[static_cast<size_t>(i)] = static_cast<float>((i * 3) % kVocab);
  std::vector<float> mean(kRows), rstd(kRows), ln_out(n);
  {
    const std::vector<float> x = Random(n, 40), gamma = Random(kCols, 41), beta = Random(kCols, 42);
    cpu->ops().layer_norm.forward(cpu->op_context(), kRows, kCols, x.data(), gamma.data(), beta.data(), ln_out.data(),
                                  mean.data(), rstd.data());
  }
  run_both("BiasAdd", {Random(n, 43), Random(kCols, 44), Random(n, 45)}, 0.0f, [&](Device& d, std::vector<float*>& t) {
    d.ops().bias_add.forward(d.op_context(), kRows, kCols, t[0], t[1], t[2]);
  });
  run_both("LayerNorm",
           {Random(n, 40), Random(kCols, 41), Random(kCols, 42), std::vector<float>(n), std::vector<float>(kRows),
            std::vector<float>(kRows)},
           1e-5f, [&](Device& d, std::vector<float*>& t) {
             d.ops().layer_norm.forward(d.op_context(), kRows, kCols, t[0], t[1], t[2], t[3], t[4], t[5]);
           });
  run_both("LayerNormBackwardInput", {Random(n, 46), Random(n, 40), Random(kCols, 41), mean, rstd, Random(n, 47)},
           1e-5f, [&](Device& d, std::vector<float*>& t) {
             d.ops().layer_norm.backward_input(d.op_context(), kRows, kCols, t[0], t[1], t[2], t[3], t[4], t[5], true);
           });
  run_both("LayerNormBackwardWeight", {Random(n, 46), Random(n, 40), mean, rstd, Random(kCols, 48), Random(kCols, 49)},
           1e-4f, [&](Device& d, std::vector<float*>& t) {
             d.ops().layer_norm.backward_weight(d.op_context(), kRows, kCols, t[0], t[1], t[2], t[3], t[4], t[5],
                                                false);
           });
  run_both("HeadsFromRows", {Random(n, 50), std::vector<float>(n)}, 0.0f, [&](Device& d, std::vector<float*>& t) {
    d.ops().attention.heads_from_rows(d.op_context(), kBatch, kSeq, kHeads, kHeadDim, t[0], kCols, t[1]);
  });
  run_both("RowsFromHeads", {Random(n, 51), std::vector<float>(n)}, 0.0f, [&](Device& d, std::vector<float*>& t) {
    d.ops().attention.rows_from_heads(d.op_context(), kBatch, kSeq, kHeads, kHeadDim, t[0], t[1], kCols);
  });
  const size_t scores = static_cast<size_t>(kBatch) * kHeads * kSeq * kSeq;
  run_both("CausalSoftmax", {Random(scores, 52)}, 1e-6f, [&](Device& d, std::vector<float*>& t) {
    d.ops().attention.causal_softmax(d.op_context(), kBatch * kHeads, kSeq, t[0]);
  });
  std::vector<float> p = Random(scores, 52);
  cpu->ops().attention.causal_softmax(cpu->op_context(), kBatch * kHeads, kSeq, p.data());
  run_both("CausalSoftmaxBackward", {p, Random(scores, 53)}, 1e-6f, [&](Device& d, std::vector<float*>& t) {
    d.ops().attention.causal_softmax_backward(d.op_context(), kBatch * kHeads, kSeq, t[0], t[1]);
  });
  const size_t wte_size = static_cast<size_t>(kVocab) * kCols, wpe_size = static_cast<size_t>(kSeq) * kCols;
  run_both("Embedding", {tokens, Random(wte_size, 54), Random(wpe_size, 55), std::vector<float>(n)}, 0.0f,
           [&](Device& d, std::vector<float*>& t) {
             d.ops().embedding.forward(d.op_context(), kBatch, kSeq, kCols, t[0], t[1], t[2], t[3]);
           });
  run_both("EmbeddingBackward", {tokens, Random(n, 56), Random(wte_size, 57), Random(wpe_size, 58)}, 0.0f,
           [&](Device& d, std::vector<float*>& t) {
             d.ops().embedding.backward(d.op_context(), kBatch, kSeq, kCols, kVocab, t[0], t[1], t[2], t[3], true);
           });
}

TEST(CudaDeviceGpuTest, MemoryIsCountedAndFreedBlocksAreReused) {
  SKIP_WITHOUT_GPU();
  auto gpu = MakeCudaDevice(0, GemmPrecision::kFp32);
  const int64_t base = gpu->memory().bytes_in_use();
  float* a = gpu->memory().Allocate(1000);
  float* b = gpu->memory().Allocate(3000);
  EXPECT_EQ(gpu->memory().bytes_in_use() - base, 16000);
  const int64_t obtained = gpu->memory().system_allocations();
  gpu->memory().Free(a, 1000);
  EXPECT_EQ(gpu->memory().bytes_in_use() - base, 12000);
  EXPECT_EQ(gpu->memory().peak_bytes() - base, 16000);
  float* again = gpu->memory().Allocate(1000);  // the same size again: from the pool
  EXPECT_EQ(again, a);
  EXPECT_EQ(gpu->memory().system_allocations(), obtained);
  gpu->memory().Free(again, 1000);
  gpu->memory().Free(b, 3000);
  EXPECT_EQ(gpu->memory().bytes_in_use(), base);
  // Between runs the kept blocks go back to the memory pool: the same size then comes from the
  // pool again (an allocation counted as the system's), and the pool keeps its memory.
  const int64_t reserved = CudaPoolReservedBytes(*gpu);
  gpu->memory().ReleaseCached();
  EXPECT_EQ(CudaPoolReservedBytes(*gpu), reserved) << "the pool keeps what is freed into it";
  float* fresh = gpu->memory().Allocate(1000);
  EXPECT_EQ(gpu->memory().system_allocations(), obtained + 1);
  gpu->memory().Free(fresh, 1000);
}

// A stamp is when the device reached it, on the host clock: after the host queued it, before
// the host saw the work done, and in queue order.
TEST(CudaDeviceGpuTest, StampsFallBetweenQueueingAndCompletionOnTheHostClock) {
  SKIP_WITHOUT_GPU();
  auto gpu = MakeCudaDevice(0, GemmPrecision::kFp32);
  const int n = 2048;
  float* a = gpu->memory().Allocate(static_cast<int64_t>(n) * n);
  float* c = gpu->memory().Allocate(static_cast<int64_t>(n) * n);
  gpu->memory().Fill(a, 0.5f, static_cast<int64_t>(n) * n);
  gpu->streams().Synchronize();
  gpu->clock().ClearStamps();
  const int64_t queued = gpu->clock().NowNs();
  const int first = gpu->clock().Stamp();
  for (int i = 0; i < 8; ++i) gpu->ops().linear.gemm(gpu->op_context(), false, false, n, n, n, 1.0f, a, a, 0.0f, c);
  const int second = gpu->clock().Stamp();
  gpu->streams().Synchronize();
  const int64_t done = gpu->clock().NowNs();
  const int64_t t1 = gpu->clock().StampNs(first), t2 = gpu->clock().StampNs(second);
  EXPECT_GE(t1, queued - 1'000'000);  // the two clocks are matched to well under a millisecond
  EXPECT_GT(t2, t1);                  // 8 GEMMs of 2048^3 take a measurable time
  EXPECT_LE(t2, done + 1'000'000);
  gpu->memory().Free(a, static_cast<int64_t>(n) * n);
  gpu->memory().Free(c, static_cast<int64_t>(n) * n);
}

// Reserve grows the pool by what it is told before a run, and the run's allocations (several
// sizes, none of them the reserved one's) come from that memory without the pool growing.
TEST(CudaDeviceGpuTest, ReserveGrowsThePoolThatTheRunThenAllocatesFrom) {
  SKIP_WITHOUT_GPU();
  auto gpu = MakeCudaDevice(0, GemmPrecision::kFp32);
  const int64_t before = CudaPoolReservedBytes(*gpu);
  const int64_t reserve = int64_t{256} << 20;
  gpu->memory().Reserve(reserve);
  gpu->streams().Synchronize();
  const int64_t reserved = CudaPoolReservedBytes(*gpu);
  EXPECT_GE(reserved, before + reserve);
  std::vector<std::pair<float*, int64_t>> blocks;
  for (const int64_t floats : {int64_t{1} << 20, int64_t{3} << 20, int64_t{7} << 20, int64_t{5} << 20}) {
    blocks.emplace_back(gpu->memory().Allocate(floats), floats);  // 64 MiB in all
  }
  EXPECT_EQ(CudaPoolReservedBytes(*gpu), reserved) << "served from the reserved memory";
  for (const auto& [data, floats] : blocks) gpu->memory().Free(data, floats);
  // Asking more than any GPU has is a hint that cannot be met: nothing throws, nothing changes.
  EXPECT_NO_THROW(gpu->memory().Reserve(int64_t{1} << 60));
  EXPECT_EQ(CudaPoolReservedBytes(*gpu), reserved);
}

// Reached asks without waiting: false while GEMMs queued before the stamp still run (on any GPU
// 16 GEMMs of 4096^3 take milliseconds, and the host asks at once), true once they are done.
TEST(CudaDeviceGpuTest, ReachedSaysWithoutWaitingWhetherTheDeviceGotToAStamp) {
  SKIP_WITHOUT_GPU();
  auto gpu = MakeCudaDevice(0, GemmPrecision::kFp32);
  const int n = 4096;
  float* a = gpu->memory().Allocate(static_cast<int64_t>(n) * n);
  float* c = gpu->memory().Allocate(static_cast<int64_t>(n) * n);
  gpu->memory().Fill(a, 0.5f, static_cast<int64_t>(n) * n);
  gpu->streams().Synchronize();
  gpu->clock().ClearStamps();
  for (int i = 0; i < 16; ++i) gpu->ops().linear.gemm(gpu->op_context(), false, false, n, n, n, 1.0f, a, a, 0.0f, c);
  const int after = gpu->clock().Stamp();
  EXPECT_FALSE(gpu->clock().Reached(after));
  gpu->streams().Synchronize();
  EXPECT_TRUE(gpu->clock().Reached(after));
  EXPECT_THROW(gpu->clock().Reached(after + 1), std::out_of_range);
  gpu->memory().Free(a, static_cast<int64_t>(n) * n);
  gpu->memory().Free(c, static_cast<int64_t>(n) * n);
}

// A failing CUDA call throws one message naming the host, the file:line, the call and CUDA's own
// error text.
TEST(CudaDeviceGpuTest, AFailingCallNamesTheCallAndCudasMessage) {
  SKIP_WITHOUT_GPU();
  EXPECT_THROW(MakeCudaDevice(CudaDeviceCount() + 7, GemmPrecision::kFp32), std::runtime_error);
  try {
    MakeCudaDevice(CudaDeviceCount() + 7, GemmPrecision::kFp32);
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cuda_device.cpp:"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaSetDevice"), std::string::npos) << what;
    EXPECT_NE(what.find("CUDA error cudaErrorInvalidDevice"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace stagecraft::exec
