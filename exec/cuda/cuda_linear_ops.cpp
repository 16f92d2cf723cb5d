// The cuda backend's matrix products (layer_ops.h, LinearOps, and the fused linear layer,
// FusedLinearOps, through cuBLASLt: cuda_lt.h): cuBLAS in the run's GemmPrecision on the compute
// stream. In bf16 and fp16 each input is read in 16 bits, from the
// 16-bit copy of the weight buffer that holds it when there is one (half_gemm_inputs.h), else
// rounded into the workspace.
#include <climits>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "cublas_check.h"
#include "cuda_parts.h"
#include "stagecraft/exec/layer_ops.h"

namespace stagecraft::exec {
namespace {

CudaOpContext& Cuda(OpContext& context) { return static_cast<CudaOpContext&>(context); }

void CheckBatch(int m, int n, int64_t stride_a, int64_t stride_b, int64_t stride_c, int batch) {
  if (batch < 0 || stride_a < 0 || stride_b < 0 || stride_c < 0) {
    throw std::invalid_argument("CudaDevice::GemmBatched: negative batch or stride (batch " + std::to_string(batch) +
                                ", strides " + std::to_string(stride_a) + ", " + std::to_string(stride_b) + ", " +
                                std::to_string(stride_c) + ")");
  }
  // cuBLAS runs the matrices of a batch concurrently: outputs that overlap would race, where
  // the cpu backend's loop would write them one after another.
  const int64_t c_count = static_cast<int64_t>(m) * n;
  if (batch > 1 && stride_c < c_count) {
    throw std::invalid_argument("CudaDevice::GemmBatched: stride_c " + std::to_string(stride_c) +
                                " makes the outputs overlap (each is " + std::to_string(c_count) + " floats)");
  }
}

// Each matrix of a batch is Gemm's column-major call (cuda_plan.h), with the strides as given.
// In bf16 and fp16 an input not held by a weight copy is rounded from its first matrix to the end
// of its last, gaps included (they lie inside the caller's tensor, and the GEMM reads none of
// them), so any strides work, at the cost of rounding the gaps.
void GemmBatched(OpContext& o, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                 int64_t stride_a, const float* b, int64_t stride_b, float beta, float* c, int64_t stride_c,
                 int batch) {
  CheckBatch(m, n, stride_a, stride_b, stride_c, batch);
  if (batch == 0) return;
  CudaOpContext& cx = Cuda(o);
  const ColumnMajorGemm g = ToColumnMajor(trans_a, trans_b, m, n, k);
  const cublasOperation_t op_first = g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N;
  const void* first = b;
  const void* second = a;
  cudaDataType_t in_type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (cx.precision() == GemmPrecision::kTf32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  if (HalfGemmInputs* halves = cx.halves()) {
    in_type = cx.precision() == GemmPrecision::kBf16 ? CUDA_R_16BF : CUDA_R_16F;
    const int64_t b_span = (batch - 1) * stride_b + static_cast<int64_t>(k) * n;
    const int64_t a_span = (batch - 1) * stride_a + static_cast<int64_t>(m) * k;
    const HalfGemmInputs::Operands rounded = halves->Round(b, b_span, a, a_span);
    first = rounded.first;
    second = rounded.second;
  }
  SC_CUBLAS_CHECK(cublasGemmStridedBatchedEx(cx.blas(), op_first, op_second, g.m, g.n, g.k, &alpha, first, in_type,
                                             g.ld_first, stride_b, second, in_type, g.ld_second, stride_a, &beta, c,
                                             CUDA_R_32F, g.ld_out, stride_c, batch, compute, CUBLAS_GEMM_DEFAULT));
  cx.Wrote(c, (batch - 1) * stride_c + static_cast<int64_t>(m) * n);
}

// One matrix: GemmBatched's call with a batch of one (cuBLAS's strided-batched GEMM with one
// matrix is its plain GEMM).
void Gemm(OpContext& o, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, const float* b,
          float beta, float* c) {
  GemmBatched(o, trans_a, trans_b, m, n, k, alpha, a, int64_t{m} * k, b, int64_t{k} * n, beta, c, int64_t{m} * n, 1);
}

void Axpy(OpContext& o, int64_t n, float alpha, const float* x, float* y) {
  if (n > INT_MAX) throw std::invalid_argument("CudaDevice::Axpy: n over INT_MAX: " + std::to_string(n));
  CudaOpContext& cx = Cuda(o);
  SC_CUBLAS_CHECK(cublasSaxpy(cx.blas(), static_cast<int>(n), &alpha, x, 1, y, 1));
  cx.Wrote(y, n);
}

void Scal(OpContext& o, int64_t n, float alpha, float* x) {
  if (n > INT_MAX) throw std::invalid_argument("CudaDevice::Scal: n over INT_MAX: " + std::to_string(n));
  CudaOpContext& cx = Cuda(o);
  SC_CUBLAS_CHECK(cublasSscal(cx.blas(), static_cast<int>(n), &alpha, x, 1));
  cx.Wrote(x, n);
}

// The operands of a cuBLASLt call in the run's precision: in bf16 and fp16 their 16-bit copies
// (a weight's kept copy, else rounded into the workspace, as GemmBatched reads them), else the
// fp32 tensors, TF32 products in tf32.
struct LtOperands {
  const void* first;
  const void* second;
  cudaDataType_t type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
};
LtOperands OperandsFor(CudaOpContext& cx, const float* first, int64_t first_floats, const float* second,
                       int64_t second_floats) {
  LtOperands o{first, second};
  if (cx.precision() == GemmPrecision::kTf32) o.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  if (HalfGemmInputs* halves = cx.halves()) {
    o.type = cx.precision() == GemmPrecision::kBf16 ? CUDA_R_16BF : CUDA_R_16F;
    const HalfGemmInputs::Operands rounded = halves->Round(first, first_floats, second, second_floats);
    o.first = rounded.first;
    o.second = rounded.second;
  }
  return o;
}

// The unfused ops of the cuda column, where cuBLASLt cannot fuse (cuda_plan.h says when).
const LayerOps& Unfused() {
  static const LayerOps ops = CudaLayerOps();
  return ops;
}

// z = x·wᵀ + bias and out = GELU(z) in one cuBLASLt call (GELU_AUX_BIAS).
void FusedForward(OpContext& o, kernels::Activation act, int rows, int out_features, int in_features, const float* x,
                  const float* w, const float* bias, const float* residual, float* z, float* out) {
  CudaOpContext& cx = Cuda(o);
  if (const std::optional<LtLinearPlan> plan = PlanFusedForward(act == kernels::Activation::kGelu, residual != nullptr,
                                                                rows, out_features, in_features, true)) {
    const LtOperands in = OperandsFor(cx, w, int64_t{out_features} * in_features, x, int64_t{rows} * in_features);
    if (LtAligned({in.first, in.second, bias, z, out}) &&
        cx.lt().Run(*plan, in.type, in.compute, in.first, in.second, 0.0f, nullptr, out, bias, z, nullptr)) {
      cx.Wrote({{z, int64_t{rows} * out_features}, {out, int64_t{rows} * out_features}});
      return;
    }
  }
  ComposedLinearForward(Unfused(), o, act, rows, out_features, in_features, x, w, bias, residual, z, out);
}

// d = GELU'(pre) ⊙ (dz·w) in one cuBLASLt call (DGELU, pre its auxiliary input).
void FusedInputGrad(OpContext& o, kernels::Activation act, int rows, int out_features, int in_features,
                    const float* dz, const float* w, const float* pre, float* d) {
  CudaOpContext& cx = Cuda(o);
  if (const std::optional<LtLinearPlan> plan =
          PlanFusedInputGrad(act == kernels::Activation::kGelu, rows, out_features, in_features, true)) {
    const LtOperands in = OperandsFor(cx, w, int64_t{out_features} * in_features, dz, int64_t{rows} * out_features);
    if (LtAligned({in.first, in.second, pre, d}) &&
        cx.lt().Run(*plan, in.type, in.compute, in.first, in.second, 0.0f, nullptr, d, nullptr,
                    const_cast<float*>(pre), nullptr)) {
      cx.Wrote(d, int64_t{rows} * in_features);
      return;
    }
  }
  ComposedLinearInputGrad(Unfused(), o, act, rows, out_features, in_features, dz, w, pre, d);
}

// y = x·wᵀ + bias (+ residual) in one cuBLASLt call (BIAS; the residual its C, beta 1).
void FusedBias(OpContext& o, int rows, int out_features, int in_features, const float* x, const float* w,
               const float* bias, const float* residual, float* y) {
  CudaOpContext& cx = Cuda(o);
  if (const std::optional<LtLinearPlan> plan = PlanFusedBias(rows, out_features, in_features, true)) {
    const LtOperands in = OperandsFor(cx, w, int64_t{out_features} * in_features, x, int64_t{rows} * in_features);
    if (LtAligned({in.first, in.second, bias, residual, y}) &&
        cx.lt().Run(*plan, in.type, in.compute, in.first, in.second, residual != nullptr ? 1.0f : 0.0f, residual, y,
                    bias, nullptr, nullptr)) {
      cx.Wrote(y, int64_t{rows} * out_features);
      return;
    }
  }
  ComposedLinearBias(Unfused(), o, rows, out_features, in_features, x, w, bias, residual, y);
}

// dw (+)= dzᵀ·x with Σ_rows dz from the same cuBLASLt call (BGRADB); accumulating, the bias
// gradient goes through cuBLASLt's scratch and is added (the epilogue writes, it does not add).
void FusedWeightGrad(OpContext& o, int rows, int out_features, int in_features, const float* dz, const float* x,
                     float* dw, float* dbias, bool accumulate) {
  CudaOpContext& cx = Cuda(o);
  const std::optional<LtLinearPlan> plan = PlanFusedWeightGrad(rows, out_features, in_features, true);
  // The scratch taken only for a call that may fuse.
  float* bias_grad = !plan ? nullptr : accumulate ? cx.lt().BiasScratch(out_features) : dbias;
  if (plan && bias_grad != nullptr) {
    const LtOperands in = OperandsFor(cx, x, int64_t{rows} * in_features, dz, int64_t{rows} * out_features);
    if (LtAligned({in.first, in.second, dw, bias_grad}) &&
        cx.lt().Run(*plan, in.type, in.compute, in.first, in.second, accumulate ? 1.0f : 0.0f, nullptr, dw, nullptr,
                    nullptr, bias_grad)) {
      if (accumulate) {
        const float one = 1.0f;
        SC_CUBLAS_CHECK(cublasSaxpy(cx.blas(), out_features, &one, bias_grad, 1, dbias, 1));
      }
      cx.Wrote({{dw, int64_t{out_features} * in_features}, {dbias, out_features}});
      return;
    }
  }
  ComposedLinearWeightGrad(Unfused(), o, rows, out_features, in_features, dz, x, dw, dbias, accumulate);
}

}  // namespace

LinearOps CudaLinearOps() { return {&Gemm, &GemmBatched, &Axpy, &Scal}; }
FusedLinearOps CudaFusedLinearOps() { return {&FusedForward, &FusedInputGrad, &FusedBias, &FusedWeightGrad}; }

}  // namespace stagecraft::exec
