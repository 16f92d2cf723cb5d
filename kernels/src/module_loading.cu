// How this process loads its CUDA kernels (cuda.h's module loading block). Since CUDA 12.2 the
// runtime loads each kernel at its first launch ("lazy loading"), and loading may wait for the
// whole context: a first launch on the compute stream while an NCCL kernel spins on another
// stream, waiting for a peer that waits for this rank, never returns (the hazard NCCL's and the
// CUDA programming guide's lazy-loading notes describe). So the cuda backend asks for eager
// loading before its first CUDA call, and preloads its own kernels in any case.
#include <cuda.h>  // CUresult and CUmoduleLoadingMode, for the driver entry point (no libcuda link)

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "launch.cuh"
#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::kernels {

bool PreferEagerModuleLoading() {
  static bool set_here = false;
  static std::once_flag once;
  std::call_once(once, [] {
    // overwrite = 0: a value the user chose (LAZY included) stays.
    set_here = std::getenv(kModuleLoadingVariable) == nullptr && setenv(kModuleLoadingVariable, "EAGER", 0) == 0;
  });
  return set_here;
}

ModuleLoading ModuleLoadingInForce() {
#if CUDART_VERSION >= 12050
  using GetLoadingMode = CUresult (*)(CUmoduleLoadingMode*);
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  // The driver's cuModuleGetLoadingMode (CUDA 11.7+), reached through the runtime so that the
  // build needs no libcuda at link time.
  if (cudaGetDriverEntryPointByVersion("cuModuleGetLoadingMode", &entry, 11070, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess || entry == nullptr) {
    (void)cudaGetLastError();
    return ModuleLoading::kUnknown;
  }
  CUmoduleLoadingMode mode{};
  if (reinterpret_cast<GetLoadingMode>(entry)(&mode) != CUDA_SUCCESS) return ModuleLoading::kUnknown;
  return mode == CU_MODULE_LAZY_LOADING ? ModuleLoading::kLazy : ModuleLoading::kEager;
#else
  return ModuleLoading::kUnknown;
#endif
}

void WarnIfEagerLoadingDidNotTakeHold() {
  if (!PreferEagerModuleLoading() || ModuleLoadingInForce() != ModuleLoading::kLazy) return;
  static std::once_flag once;
  std::call_once(once, [] {
    std::fprintf(stderr,
                 "stagecraft: warning: CUDA loads kernels lazily in this process although stagecraft set "
                 "CUDA_MODULE_LOADING=EAGER before its first CUDA call (something initialized CUDA earlier): a "
                 "cuBLAS kernel loaded while an NCCL transfer waits can deadlock; export CUDA_MODULE_LOADING=EAGER "
                 "before the job starts\n");
  });
}

void PreloadKernels() {
  PreloadActivationKernels();
  PreloadAttentionKernels();
  PreloadBiasAddKernels();
  PreloadConvertKernels();
  PreloadEmbeddingKernels();
  PreloadLayerNormKernels();
  PreloadLossKernels();
  PreloadOptimizerKernels();
}

}  // namespace stagecraft::kernels
