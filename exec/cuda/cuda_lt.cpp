// CudaLt (cuda_lt.h): cuBLASLt matmuls with the fused linear layer's epilogues.
#include "cuda_lt.h"

#include <cstdint>
#include <utility>

#include "cublas_check.h"

namespace stagecraft::exec {
namespace {

template <typename T>
void SetDesc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  SC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)));
}

template <typename T>
void SetPreference(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attribute, const T& value) {
  SC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value, sizeof(value)));
}

cublasLtEpilogue_t Epilogue(LtEpilogue e) {
  switch (e) {
    case LtEpilogue::kGeluAuxBias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case LtEpilogue::kBgradB: return CUBLASLT_EPILOGUE_BGRADB;
    case LtEpilogue::kDGelu: return CUBLASLT_EPILOGUE_DGELU;
    case LtEpilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// A column-major matrix as stored: `rows` x `cols` before its op (cuBLASLt's layouts describe
// the stored matrix; the op is the descriptor's).
cublasLtMatrixLayout_t Layout(cudaDataType_t type, int rows, int cols, int ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  SC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols),
                                             static_cast<int64_t>(ld)));
  return layout;
}

}  // namespace

CudaLt::CudaLt(cudaStream_t stream, std::function<void*(int64_t)> take) : stream_(stream), take_(std::move(take)) {
  SC_CUBLAS_CHECK(cublasLtCreate(&lt_));
}

CudaLt::~CudaLt() {
  for (auto& [shape, p] : prepared_) Destroy(&p);
}

CudaLt::Prepared& CudaLt::Prepare(const Shape& s) {
  if (auto it = prepared_.find(s); it != prepared_.end()) return it->second;
  Prepared& p = prepared_[s];
  try {
    Describe(s, &p);
  } catch (...) {  // not kept half made: asked again next time, and its descriptors go now
    Destroy(&p);
    prepared_.erase(s);
    throw;
  }
  return p;
}

void CudaLt::Destroy(Prepared* p) {
  if (p->first != nullptr) (void)cublasLtMatrixLayoutDestroy(p->first);
  if (p->second != nullptr) (void)cublasLtMatrixLayoutDestroy(p->second);
  if (p->out != nullptr) (void)cublasLtMatrixLayoutDestroy(p->out);
  if (p->desc != nullptr) (void)cublasLtMatmulDescDestroy(p->desc);
  *p = Prepared{};
}

void CudaLt::Describe(const Shape& s, Prepared* prepared) {
  Prepared& p = *prepared;
  SC_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, s.compute, CUDA_R_32F));
  SetDesc(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, s.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N);
  SetDesc(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, s.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N);
  SetDesc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, Epilogue(s.epilogue));
  // The bias, its gradient and z are fp32: the types cuBLASLt takes by default with an fp32 D.
  if (s.epilogue == LtEpilogue::kGeluAuxBias || s.epilogue == LtEpilogue::kDGelu) {
    SetDesc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, s.aux_ld);
  }
  p.first = Layout(s.in_type, s.trans_first ? s.k : s.m, s.trans_first ? s.m : s.k, s.ld_first);
  p.second = Layout(s.in_type, s.trans_second ? s.n : s.k, s.trans_second ? s.k : s.n, s.ld_second);
  p.out = Layout(CUDA_R_32F, s.m, s.n, s.ld_out);
  // The heuristic reads the bias and auxiliary pointers' alignment from their values (it does
  // not dereference them): until a call sets the real ones, addresses exactly as aligned as the
  // plans check, so the algorithm it keeps assumes no more of any operand.
  void* const aligned = reinterpret_cast<void*>(static_cast<uintptr_t>(kLtAlignmentBytes));
  if (s.epilogue != LtEpilogue::kDGelu) SetDesc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, aligned);
  if (s.aux_ld > 0) SetDesc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aligned);
  cublasLtMatmulPreference_t pref = nullptr;
  SC_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  struct PreferenceGuard {
    cublasLtMatmulPreference_t pref;
    ~PreferenceGuard() { (void)cublasLtMatmulPreferenceDestroy(pref); }
  } guard{pref};
  // Only algorithms that need no more than the workspace and the 16-byte alignment the plans check.
  SetPreference(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(kWorkspaceBytes));
  for (const auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                               CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    SetPreference(pref, attribute, static_cast<uint32_t>(kLtAlignmentBytes));
  }
  int returned = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(lt_, p.desc, p.first, p.second, p.out, p.out, pref, 1, &p.algo, &returned);
  if (status != CUBLAS_STATUS_SUCCESS && status != CUBLAS_STATUS_NOT_SUPPORTED) {
    CheckCublas(status, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
  }
  // No algorithm (NOT_SUPPORTED, none returned, or one whose own state is not success): this
  // shape runs unfused, asked once.
  p.found = status == CUBLAS_STATUS_SUCCESS && returned > 0 && p.algo.state == CUBLAS_STATUS_SUCCESS;
}

bool CudaLt::Run(const LtLinearPlan& plan, cudaDataType_t in_type, cublasComputeType_t compute, const void* first,
                 const void* second, float beta, const float* c, float* out, const float* bias, float* aux,
                 float* bias_grad) {
  const ColumnMajorGemm& g = plan.g;
  const Shape shape{plan.epilogue, in_type,   compute,  g.trans_first, g.trans_second, g.m,        g.n,
                    g.k,           g.ld_first, g.ld_second, g.ld_out, plan.aux_ld,    beta != 0.0f};
  Prepared& p = Prepare(shape);
  if (!p.found) return false;
  void* const workspace = Workspace();
  switch (plan.epilogue) {
    case LtEpilogue::kGeluAuxBias:
      SetDesc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
      SetDesc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, static_cast<void*>(aux));
      break;
    case LtEpilogue::kDGelu:  // the GELU's input, read
      SetDesc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, static_cast<const void*>(aux));
      break;
    case LtEpilogue::kBgradB:
      SetDesc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<void*>(bias_grad));
      break;
    case LtEpilogue::kBias:
      SetDesc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
      break;
  }
  const float alpha = 1.0f;
  const cublasStatus_t status = cublasLtMatmul(lt_, p.desc, &alpha, first, p.first, second, p.second, &beta,
                                               c != nullptr ? c : out, p.out, out, p.out, &p.algo.algo, workspace,
                                               static_cast<size_t>(kWorkspaceBytes), stream_);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) {  // this device cannot run what the heuristic chose:
    p.found = false;                            // unfused from now on, nothing queued
    return false;
  }
  CheckCublas(status, "cublasLtMatmul", __FILE__, __LINE__);
  ++calls_;
  return true;
}

float* CudaLt::BiasScratch(int64_t floats) {
  if (floats > kBiasScratchFloats) return nullptr;
  if (bias_scratch_ == nullptr) {
    bias_scratch_ = static_cast<float*>(take_(kBiasScratchFloats * static_cast<int64_t>(sizeof(float))));
  }
  return bias_scratch_;
}

void CudaLt::ReleaseAtExit() {
  if (workspace_ != nullptr) (void)cudaFreeAsync(workspace_, stream_);
  if (bias_scratch_ != nullptr) (void)cudaFreeAsync(bias_scratch_, stream_);
  workspace_ = nullptr;
  bias_scratch_ = nullptr;
}

void CudaLt::DestroyAtExit() {
  if (lt_ != nullptr) (void)cublasLtDestroy(lt_);
  lt_ = nullptr;
}

}  // namespace stagecraft::exec
