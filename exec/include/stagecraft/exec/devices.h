// Whether this process can use the cuda backend, and why not (`stagecraft devices`, and the
// choice of `--backend auto|cuda`). ProbeCuda asks the CUDA runtime and records its answers as
// plain data; JudgeDevices turns them into the verdict and the lines that explain it, with no
// CUDA call, so that every case (no driver, a driver too old, a prohibited GPU, a GPU this
// build has no kernels for) is tested on any machine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stagecraft::exec {

// cudaError_t values the verdict tells apart (cuda_probe.cpp checks them against CUDA's enum).
namespace cuda_error {
inline constexpr int kSuccess = 0;
inline constexpr int kInitializationError = 3;
inline constexpr int kStubLibrary = 34;
inline constexpr int kInsufficientDriver = 35;
inline constexpr int kDevicesUnavailable = 46;
inline constexpr int kNoDevice = 100;
inline constexpr int kDeviceNotLicensed = 102;
inline constexpr int kEccUncorrectable = 214;
inline constexpr int kNotPermitted = 800;
inline constexpr int kSystemNotReady = 802;
inline constexpr int kSystemDriverMismatch = 803;
inline constexpr int kCompatNotSupportedOnDevice = 804;
}  // namespace cuda_error

// cudaComputeMode values (cudaDevAttrComputeMode).
enum class ComputeMode { kDefault = 0, kExclusiveThread = 1, kProhibited = 2, kExclusiveProcess = 3 };

// One GPU as the runtime described it.
struct GpuProbe {
  int index = 0;                // as this process numbers it (after CUDA_VISIBLE_DEVICES)
  std::string name;             // "NVIDIA H100 80GB HBM3"
  std::string pci_bus_id;       // "0000:3b:00.0"
  int64_t memory_bytes = 0;
  int64_t free_bytes = -1;      // with a context only (ProbeCuda(true)); -1: not asked
  int major = 0, minor = 0;     // compute capability
  ComputeMode compute_mode = ComputeMode::kDefault;
  int error = cuda_error::kSuccess;  // the first failing query or the context's creation
  std::string error_text;            // that call and CUDA's name and message for it
};

// What the CUDA runtime of this build said on this machine.
struct CudaProbe {
  bool have_backend = false;     // this build has the cuda backend
  bool have_nccl = false;        // ... and the NCCL transport
  std::string architectures;     // the kernels' CUDA architectures ("90", "80,90-real"; CMake's list)
  int runtime_version = 0;       // cudaRuntimeGetVersion: 1000·major + 10·minor (13000 = 13.0)
  int driver_version = 0;        // cudaDriverGetVersion: the newest CUDA the driver runs; 0 = no driver
  int nccl_version = 0;          // ncclGetVersion (22809 = 2.28.9); 0 = none
  int count_error = cuda_error::kSuccess;  // cudaGetDeviceCount's answer
  std::string count_error_text;            // its name and message when it failed
  std::optional<std::string> visible_devices;  // CUDA_VISIBLE_DEVICES, when set
  std::vector<GpuProbe> gpus;
};

// Asks the CUDA runtime (cuda_probe.cpp; cuda_absent.cpp in a build without CUDA). With
// `open_contexts`, also makes a context on each GPU that allows one (what a run would do first;
// it finds a GPU held by another process in exclusive mode, and its free memory), then
// releases it; without, it asks only for counts and properties (cheap enough for every rank).
CudaProbe ProbeCuda(bool open_contexts);

// One entry of CMAKE_CUDA_ARCHITECTURES: "90" is SASS for sm_90 and PTX for compute_90,
// "90-real" the SASS alone, "90-virtual" the PTX alone; "90a" (arch-specific) and "100f"
// (family) carry a suffix.
struct CudaArch {
  int major = 0, minor = 0;
  char suffix = '\0';  // '\0', 'a' or 'f'
  bool sass = true;
  bool ptx = true;
};
// The entries of `list` (separated by ',' or ';'). "all", "all-major" and "native" cannot be
// judged here: nullopt. Throws std::invalid_argument on an entry CMake would not accept.
std::optional<std::vector<CudaArch>> ParseCudaArchitectures(std::string_view list);

// How a GPU of compute capability major.minor runs the build's kernels.
enum class KernelCode { kNone, kSass, kPtxJit, kUnknown };
KernelCode KernelCodeFor(const std::optional<std::vector<CudaArch>>& archs, int major, int minor);

// The verdict's classes, each with its exit code of `stagecraft devices` (DevicesExitCode).
enum class DevicesStatus {
  kUsable,         // 0: every visible GPU can run this build's cuda backend
  kNoCudaBackend,  // 3: this build has no cuda backend
  kNoGpu,          // 4: no GPU is visible (no driver, no device, CUDA_VISIBLE_DEVICES hides them)
  kUnusable,       // 5: a GPU is there but this build cannot use it (driver, mode, architecture, ...)
};
int DevicesExitCode(DevicesStatus status);

struct GpuVerdict {
  int index = 0;
  bool usable = false;
  std::string why;   // empty when usable
  std::string note;  // what else to know (exclusive mode, JIT from PTX); may be empty
};

struct DevicesVerdict {
  DevicesStatus status = DevicesStatus::kNoCudaBackend;
  std::string reason;             // why the cuda backend is not usable here; empty when it is
  std::vector<GpuVerdict> gpus;   // in probe order
  std::vector<std::string> lines; // what `stagecraft devices` prints; the verdict is the last
};
DevicesVerdict JudgeDevices(const CudaProbe& probe);

// "13.0" for 13000 (CUDA's encoding); "2.28.9" for 22809 and "2.7.8" for 2708 (NCCL's).
std::string CudaVersionText(int version);
std::string NcclVersionText(int version);

}  // namespace stagecraft::exec
