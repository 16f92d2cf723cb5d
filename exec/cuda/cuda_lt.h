// cuBLASLt for the cuda backend's fused linear layers (LayerOps::fused_linear): one handle on the
// compute stream, a fixed workspace, and for each shape and epilogue run, its descriptors with the
// algorithm cuBLASLt's heuristic chose, kept (the pointers are set at each call). The plans
// themselves (operands, leading dimensions, epilogue) are cuda_plan.h's, tested on any machine.
// Private to the cuda backend.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <tuple>

#include "stagecraft/exec/cuda_plan.h"

namespace stagecraft::exec {

class CudaLt {
 public:
  // llm.c's size for Hopper: what its algorithms ask for at the shapes of a GPT-2 layer.
  static constexpr int64_t kWorkspaceBytes = 32LL << 20;

  // `take`: stream-ordered device memory counted as in use (CudaMemory::TakeOrdered).
  CudaLt(cudaStream_t stream, std::function<void*(int64_t)> take);
  ~CudaLt();  // the descriptors; the handle and memory go in ReleaseAtExit and DestroyAtExit
  CudaLt(const CudaLt&) = delete;
  CudaLt& operator=(const CudaLt&) = delete;

  // The plan's GEMM with its epilogue: out = first·second (op'd as the plan says) + beta · c (c
  // null: out itself; laid out as out),
  // `in_type` the operands' type (fp32, or the 16-bit copies), `compute` cuBLAS's compute type.
  // kGeluAuxBias reads `bias` and writes `aux`; kDGelu reads `aux`; kBias reads `bias`; kBgradB
  // writes the bias gradient to `bias_grad`.
  // False, having queued nothing, where cuBLASLt has no algorithm for it (the caller runs the
  // unfused ops); a failing call throws.
  bool Run(const LtLinearPlan& plan, cudaDataType_t in_type, cublasComputeType_t compute, const void* first,
           const void* second, float beta, const float* c, float* out, const float* bias, float* aux,
           float* bias_grad);

  // Where a bias gradient that is to be added to another goes first (kBgradB writes, it does
  // not add): kBiasScratchFloats floats of its own, taken at first use (the memory's workspace
  // holds the GEMM's 16-bit operands meanwhile); null for a longer one.
  static constexpr int64_t kBiasScratchFloats = 1 << 16;
  float* BiasScratch(int64_t floats);

  // The fixed workspace of every call, taken at first use (cuBLAS shares it: cuda_op_context.cpp).
  void* Workspace() {
    if (workspace_ == nullptr) workspace_ = take_(kWorkspaceBytes);
    return workspace_;
  }

  // The fused calls queued so far (those that ran unfused are not counted).
  int64_t calls() const { return calls_; }

  // At the device's end, once its stream has drained: the memory back to the pool
  // (stream-ordered, unchecked), then the handle.
  void ReleaseAtExit();
  void DestroyAtExit();

 private:
  struct Shape {  // what a descriptor set is kept by
    LtEpilogue epilogue;
    cudaDataType_t in_type;
    cublasComputeType_t compute;
    bool trans_first, trans_second;
    int m, n, k, ld_first, ld_second, ld_out;
    int64_t aux_ld;
    bool accumulate;  // beta != 0: the heuristic chooses for C read
    auto Tie() const {
      return std::tie(epilogue, in_type, compute, trans_first, trans_second, m, n, k, ld_first, ld_second, ld_out,
                      aux_ld, accumulate);
    }
    bool operator<(const Shape& o) const { return Tie() < o.Tie(); }
  };
  struct Prepared {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
    cublasLtMatmulHeuristicResult_t algo{};
    bool found = false;  // the heuristic returned an algorithm
  };
  Prepared& Prepare(const Shape& shape);
  void Describe(const Shape& shape, Prepared* p);  // the descriptors and the heuristic's algorithm
  static void Destroy(Prepared* p);

  cudaStream_t stream_;
  std::function<void*(int64_t)> take_;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  float* bias_scratch_ = nullptr;
  int64_t calls_ = 0;
  std::map<Shape, Prepared> prepared_;
};

}  // namespace stagecraft::exec
