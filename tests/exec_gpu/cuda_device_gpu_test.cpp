// Tests for the cuda device (exec/cuda_device.h) on a GPU: its GEMMs against BLAS (the cpu
// device) and against a double-precision product for every dtype and pair of transposes, within
// the rounding bound of each precision; memory accounting and the pool; op stamps on the host
// clock; and a failing call's message. Without a CUDA device every test skips with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/cuda_device.h"

namespace stagecraft::exec {
namespace {

#define SKIP_WITHOUT_GPU()                                                                       \
  do {                                                                                           \
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "SKIPPED: no CUDA device on this machine";       \
  } while (0)

std::vector<float> Random(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

void OnDevice(Device& device, const std::vector<float>& host, float** data) {
  *data = device.Allocate(static_cast<int64_t>(host.size()));
  device.Upload(*data, host.data(), static_cast<int64_t>(host.size()));
}

// c = alpha · op(a) · op(b) + beta · c on `device`, returned to the host.
std::vector<float> RunGemm(Device& device, bool ta, bool tb, int m, int n, int k, float alpha, float beta,
                           const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c0) {
  float *da = nullptr, *db = nullptr, *dc = nullptr;
  OnDevice(device, a, &da);
  OnDevice(device, b, &db);
  OnDevice(device, c0, &dc);
  device.Gemm(ta, tb, m, n, k, alpha, da, db, beta, dc);
  std::vector<float> c(c0.size());
  device.Download(c.data(), dc, static_cast<int64_t>(c.size()));
  device.Free(da, static_cast<int64_t>(a.size()));
  device.Free(db, static_cast<int64_t>(b.size()));
  device.Free(dc, static_cast<int64_t>(c0.size()));
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

TEST(CudaDeviceGpuTest, GemmMatchesBlasAndTheExactProductForEveryDtypeAndTranspose) {
  SKIP_WITHOUT_GPU();
  auto cpu = MakeCpuDevice();
  struct Shape {
    int m, n, k;
  };
  for (const GemmPrecision precision :
       {GemmPrecision::kFp32, GemmPrecision::kTf32, GemmPrecision::kBf16, GemmPrecision::kFp16}) {
    auto gpu = MakeCudaDevice(0, precision);
    const double u = InputRoundoff(precision);
    for (const Shape s : {Shape{1, 1, 1}, Shape{37, 53, 29}, Shape{128, 256, 64}, Shape{64, 512, 512}}) {
      for (const bool ta : {false, true}) {
        for (const bool tb : {false, true}) {
          for (const float beta : {0.0f, 1.0f}) {
            SCOPED_TRACE(gpu->Name() + " precision " + std::to_string(static_cast<int>(precision)) + " " +
                         std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) +
                         (ta ? " aT" : "") + (tb ? " bT" : "") + " beta " + std::to_string(beta));
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

TEST(CudaDeviceGpuTest, MemoryIsCountedAndFreedBlocksAreReused) {
  SKIP_WITHOUT_GPU();
  auto gpu = MakeCudaDevice(0, GemmPrecision::kFp32);
  const int64_t base = gpu->bytes_in_use();
  float* a = gpu->Allocate(1000);
  float* b = gpu->Allocate(3000);
  EXPECT_EQ(gpu->bytes_in_use() - base, 16000);
  const int64_t obtained = gpu->system_allocations();
  gpu->Free(a, 1000);
  EXPECT_EQ(gpu->bytes_in_use() - base, 12000);
  EXPECT_EQ(gpu->peak_bytes() - base, 16000);
  float* again = gpu->Allocate(1000);  // the same size again: from the pool
  EXPECT_EQ(again, a);
  EXPECT_EQ(gpu->system_allocations(), obtained);
  gpu->Free(again, 1000);
  gpu->Free(b, 3000);
  EXPECT_EQ(gpu->bytes_in_use(), base);
}

// A stamp is when the device reached it, on the host clock: after the host queued it, before
// the host saw the work done, and in queue order.
TEST(CudaDeviceGpuTest, StampsFallBetweenQueueingAndCompletionOnTheHostClock) {
  SKIP_WITHOUT_GPU();
  auto gpu = MakeCudaDevice(0, GemmPrecision::kFp32);
  const int n = 2048;
  float* a = gpu->Allocate(static_cast<int64_t>(n) * n);
  float* c = gpu->Allocate(static_cast<int64_t>(n) * n);
  gpu->Fill(a, 0.5f, static_cast<int64_t>(n) * n);
  gpu->Synchronize();
  gpu->ClearStamps();
  const int64_t queued = gpu->NowNs();
  const int first = gpu->Stamp();
  for (int i = 0; i < 8; ++i) gpu->Gemm(false, false, n, n, n, 1.0f, a, a, 0.0f, c);
  const int second = gpu->Stamp();
  gpu->Synchronize();
  const int64_t done = gpu->NowNs();
  const int64_t t1 = gpu->StampNs(first), t2 = gpu->StampNs(second);
  EXPECT_GE(t1, queued - 1'000'000);  // the two clocks are matched to well under a millisecond
  EXPECT_GT(t2, t1);                  // 8 GEMMs of 2048^3 take a measurable time
  EXPECT_LE(t2, done + 1'000'000);
  gpu->Free(a, static_cast<int64_t>(n) * n);
  gpu->Free(c, static_cast<int64_t>(n) * n);
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
