// CudaOpContext (cuda_parts.h): what the cuda layer ops run with.
#include "cublas_check.h"
#include "cuda_parts.h"

namespace stagecraft::exec {

CudaOpContext::CudaOpContext(cudaStream_t compute, GemmPrecision precision, CudaMemory& memory)
    : stream_(compute), precision_(precision), memory_(memory) {
  SC_CUBLAS_CHECK(cublasCreate(&blas_));
  SC_CUBLAS_CHECK(cublasSetStream(blas_, stream_));
  SC_CUBLAS_CHECK(cublasSetPointerMode(blas_, CUBLAS_POINTER_MODE_HOST));
  lt_.emplace(stream_, [this](int64_t bytes) { return memory_.TakeOrdered(bytes); });
  if (precision_ == GemmPrecision::kBf16 || precision_ == GemmPrecision::kFp16) {
    halves_.emplace(precision_ == GemmPrecision::kBf16 ? kernels::HalfFormat::kBf16 : kernels::HalfFormat::kFp16,
                    stream_,
                    HalfGemmInputs::Memory{[this](int64_t bytes) { return memory_.TakeOrdered(bytes); },
                                           [this](int64_t delta_bytes) { memory_.CountBytes(delta_bytes); },
                                           [this](int64_t bytes) { return memory_.Workspace(bytes); }});
    memory_.WatchWrites(&*halves_);
  }
}

CudaOpContext::~CudaOpContext() { memory_.WatchWrites(nullptr); }

kernels::ScratchSpan CudaOpContext::FloatScratch(int64_t floats) {
  return kernels::ScratchSpan{static_cast<float*>(memory_.Workspace(floats * static_cast<int64_t>(sizeof(float)))),
                              floats};
}

void CudaOpContext::PrepareForCapture() {
  if (blas_in_lt_workspace_) return;
  SC_CUBLAS_CHECK(cublasSetWorkspace(blas_, lt_->Workspace(), static_cast<size_t>(CudaLt::kWorkspaceBytes)));
  blas_in_lt_workspace_ = true;
}

void CudaOpContext::ReleaseHalvesAtExit() {
  memory_.WatchWrites(nullptr);
  halves_.reset();
  if (lt_) lt_->ReleaseAtExit();
}

void CudaOpContext::DestroyBlasAtExit() {
  if (blas_ != nullptr && blas_in_lt_workspace_) (void)cublasSetWorkspace(blas_, nullptr, 0);  // about to go
  if (blas_ != nullptr) (void)cublasDestroy(blas_);
  blas_ = nullptr;
  if (lt_) lt_->DestroyAtExit();
}

}  // namespace stagecraft::exec
