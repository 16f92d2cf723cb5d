// The verdict on this machine's GPUs from what the CUDA runtime said (devices.h): no CUDA call
// here, only the probe's answers, the build's architectures and the rules that join them.
#include "stagecraft/exec/devices.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "stagecraft/base/format.h"

namespace stagecraft::exec {
namespace {

constexpr std::string_view kNoToolkit = "the CUDA toolkit was not found when it was configured";

// What to do about a CUDA error the runtime gives before any work (the CUDA runtime API's
// documentation of each code).
struct ErrorHint {
  int code;
  std::string_view hint;
};
constexpr std::array<ErrorHint, 9> kHints = {{
    {cuda_error::kInitializationError, "the driver failed to initialise (see dmesg and nvidia-smi)"},
    {cuda_error::kStubLibrary,
     "the toolkit's stub libcuda (lib64/stubs) was loaded instead of the driver's: take it off LD_LIBRARY_PATH"},
    {cuda_error::kDevicesUnavailable,
     "busy or unavailable: held by another process in exclusive-process compute mode, or prohibited"},
    {cuda_error::kDeviceNotLicensed, "a virtual GPU without a licence"},
    {cuda_error::kEccUncorrectable, "an uncorrectable ECC error: the GPU needs a reset (nvidia-smi -r)"},
    {cuda_error::kNotPermitted, "not permitted for this process (container or cgroup device rules)"},
    {cuda_error::kSystemNotReady,
     "the system is not ready: on an NVSwitch machine (HGX, DGX) nvidia-fabricmanager must be running"},
    {cuda_error::kSystemDriverMismatch,
     "the loaded kernel module and libcuda are different driver versions: reboot, or reinstall the driver"},
    {cuda_error::kCompatNotSupportedOnDevice,
     "the CUDA forward-compatibility package does not support this GPU: remove it or update the driver"},
}};

std::string WithHint(const std::string& text, int code) {
  for (const ErrorHint& h : kHints) {
    if (h.code == code) return fmt::format("{}: {}", text, h.hint);
  }
  return text;
}

std::string ArchsText(const std::vector<CudaArch>& archs) {
  std::string text;
  for (const CudaArch& a : archs) {
    const std::string n = fmt::format("{}{}{}", a.major, a.minor, a.suffix == '\0' ? "" : std::string(1, a.suffix));
    if (a.sass) text += fmt::format("{}sm_{}", text.empty() ? "" : ", ", n);
    if (a.ptx) text += fmt::format("{}compute_{} (PTX)", text.empty() ? "" : ", ", n);
  }
  return text.empty() ? "none" : text;
}

std::string BackendLine(const CudaProbe& p) {
  if (!p.have_backend) return fmt::format("cuda backend: not in this build ({})", kNoToolkit);
  std::string kernels;
  try {
    const auto archs = ParseCudaArchitectures(p.architectures);
    kernels = archs ? ArchsText(*archs) : "whatever CMake chose";
  } catch (const std::invalid_argument& e) {
    kernels = e.what();
  }
  const std::string nccl = p.have_nccl ? fmt::format("NCCL {}", NcclVersionText(p.nccl_version))
                                       : "no NCCL (ranks with a GPU each move tensors through host memory over MPI)";
  return fmt::format("cuda backend: in this build (CUDA runtime {}; kernels for {}, CMAKE_CUDA_ARCHITECTURES={}; {})",
                     CudaVersionText(p.runtime_version), kernels, p.architectures, nccl);
}

// Why cudaGetDeviceCount failed, and whether that means "no GPU here" or "a GPU we cannot use".
std::pair<DevicesStatus, std::string> CountFailure(const CudaProbe& p) {
  const std::string call = fmt::format("cudaGetDeviceCount: {}", p.count_error_text);
  if (p.count_error == cuda_error::kInsufficientDriver && p.driver_version == 0) {
    return {DevicesStatus::kNoGpu,
            fmt::format("no CUDA device was found: no NVIDIA driver is loaded on this machine ({}, and "
                        "cudaDriverGetVersion reports none)",
                        call)};
  }
  if (p.count_error == cuda_error::kInsufficientDriver) {
    return {DevicesStatus::kUnusable,
            fmt::format("the NVIDIA driver runs CUDA {} at most, older than this build's CUDA runtime {} ({}): "
                        "install a driver for CUDA {} or newer (or the CUDA forward-compatibility package), or "
                        "build with a CUDA {} toolkit",
                        CudaVersionText(p.driver_version), CudaVersionText(p.runtime_version), call,
                        CudaVersionText(p.runtime_version), CudaVersionText(p.driver_version))};
  }
  if (p.count_error == cuda_error::kNoDevice) {
    const std::string hidden =
        p.visible_devices ? fmt::format(" (CUDA_VISIBLE_DEVICES='{}' may hide them)", *p.visible_devices) : "";
    return {DevicesStatus::kNoGpu,
            fmt::format("no CUDA device was found: the driver sees no GPU{} ({})", hidden, call)};
  }
  return {DevicesStatus::kUnusable, WithHint(call, p.count_error)};
}

GpuVerdict JudgeGpu(const GpuProbe& g, const std::optional<std::vector<CudaArch>>& archs, const CudaProbe& p) {
  GpuVerdict v;
  v.index = g.index;
  if (g.error != cuda_error::kSuccess) {
    v.why = WithHint(g.error_text, g.error);
    return v;
  }
  if (g.compute_mode == ComputeMode::kProhibited) {
    v.why = "its compute mode is Prohibited, so no process may use it (nvidia-smi -c DEFAULT allows it again)";
    return v;
  }
  const KernelCode code = KernelCodeFor(archs, g.major, g.minor);
  if (code == KernelCode::kNone) {
    v.why = fmt::format(
        "compute capability {}.{}, and this build has kernels for {} only (CMAKE_CUDA_ARCHITECTURES={}): "
        "configure with -DCMAKE_CUDA_ARCHITECTURES=\"{};{}{}\"",
        g.major, g.minor, ArchsText(*archs), p.architectures, p.architectures, g.major, g.minor);
    return v;
  }
  v.usable = true;
  std::vector<std::string> notes;
  if (code == KernelCode::kPtxJit) {
    notes.push_back(fmt::format("the kernels are compiled from PTX when a run starts (add {}{} to "
                                "CMAKE_CUDA_ARCHITECTURES to skip that)",
                                g.major, g.minor));
  }
  if (code == KernelCode::kUnknown) {
    notes.push_back(fmt::format("CMAKE_CUDA_ARCHITECTURES={} is not checked here", p.architectures));
  }
  if (g.compute_mode == ComputeMode::kExclusiveProcess || g.compute_mode == ComputeMode::kExclusiveThread) {
    notes.push_back("its compute mode is exclusive: one process at a time, so ranks cannot share it");
  }
  for (const std::string& n : notes) v.note += (v.note.empty() ? "" : "; ") + n;
  return v;
}

std::string GpuLine(const GpuProbe& g, const GpuVerdict& v) {
  const std::string free = g.free_bytes >= 0 ? fmt::format(" ({} free)", FormatBytes(g.free_bytes)) : "";
  const std::string what = g.name.empty() ? "" : fmt::format("{}, {}{}, compute capability {}.{}, {}: ", g.name,
                                                              FormatBytes(g.memory_bytes), free, g.major,
                                                              g.minor, g.pci_bus_id);
  const std::string state = v.usable ? "usable" : "not usable: " + v.why;
  return fmt::format("GPU {}: {}{}{}", g.index, what, state, v.note.empty() ? "" : " (" + v.note + ")");
}

// The verdict over GPUs that cudaGetDeviceCount found: usable only when every one is, since a
// job's ranks take every visible GPU in turn.
void JudgeGpus(const CudaProbe& p, DevicesVerdict* out) {
  std::optional<std::vector<CudaArch>> archs;
  try {
    archs = ParseCudaArchitectures(p.architectures);
  } catch (const std::invalid_argument&) {
    archs = std::nullopt;  // BackendLine names the bad entry
  }
  std::vector<std::string> usable, unusable;
  for (const GpuProbe& g : p.gpus) {
    const GpuVerdict v = JudgeGpu(g, archs, p);
    out->lines.push_back(GpuLine(g, v));
    (v.usable ? usable : unusable).push_back(std::to_string(g.index));
    if (!v.usable && out->reason.empty()) out->reason = fmt::format("GPU {} ({}): {}", g.index, g.name, v.why);
    out->gpus.push_back(v);
  }
  if (unusable.empty()) {
    out->status = DevicesStatus::kUsable;
    return;
  }
  out->status = DevicesStatus::kUnusable;
  if (unusable.size() > 1) out->reason += fmt::format(" (and {} more GPU(s), listed above)", unusable.size() - 1);
  if (!usable.empty()) {
    std::string list;
    for (const std::string& i : usable) list += (list.empty() ? "" : ",") + i;
    out->reason += fmt::format("; a job takes every visible GPU, so show it only the usable ones: "
                               "CUDA_VISIBLE_DEVICES={}",
                               list);
  }
}

}  // namespace

int DevicesExitCode(DevicesStatus status) {
  switch (status) {
    case DevicesStatus::kUsable: return 0;
    case DevicesStatus::kNoCudaBackend: return 3;
    case DevicesStatus::kNoGpu: return 4;
    case DevicesStatus::kUnusable: return 5;
  }
  return 5;
}

std::string CudaVersionText(int version) {
  if (version <= 0) return "none";
  return fmt::format("{}.{}", version / 1000, version % 1000 / 10);
}

std::string NcclVersionText(int version) {
  if (version <= 0) return "none";
  // NCCL_VERSION_CODE: 1000·major + 100·minor + patch before 2.9, 10000·major + 100·minor + patch since.
  const int major_unit = version >= 20900 ? 10000 : 1000;
  return fmt::format("{}.{}.{}", version / major_unit, version % major_unit / 100, version % 100);
}

std::optional<std::vector<CudaArch>> ParseCudaArchitectures(std::string_view list) {
  std::vector<CudaArch> out;
  size_t begin = 0;
  while (begin <= list.size()) {
    const size_t end = std::min(list.find_first_of(",;", begin), list.size());
    std::string entry(list.substr(begin, end - begin));
    begin = end + 1;
    entry.erase(std::remove_if(entry.begin(), entry.end(), [](unsigned char c) { return std::isspace(c); }),
                entry.end());
    if (entry.empty()) continue;
    if (entry == "all" || entry == "all-major" || entry == "native") return std::nullopt;
    CudaArch a;
    std::string_view rest = entry;
    if (rest.ends_with("-real")) {
      a.ptx = false;
      rest.remove_suffix(5);
    } else if (rest.ends_with("-virtual")) {
      a.sass = false;
      rest.remove_suffix(8);
    }
    if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) {
      a.suffix = rest.back();
      rest.remove_suffix(1);
    }
    const bool digits = rest.size() >= 2 && rest.size() <= 3 &&
                        std::all_of(rest.begin(), rest.end(), [](unsigned char c) { return std::isdigit(c); });
    if (!digits) {
      throw std::invalid_argument(fmt::format(
          "CUDA architecture '{}': expected a number such as 90, 90a, 90-real or 90-virtual", entry));
    }
    const int number = std::stoi(std::string(rest));
    a.major = number / 10;
    a.minor = number % 10;
    out.push_back(a);
  }
  return out;
}

KernelCode KernelCodeFor(const std::optional<std::vector<CudaArch>>& archs, int major, int minor) {
  if (!archs) return KernelCode::kUnknown;
  KernelCode best = KernelCode::kNone;
  for (const CudaArch& a : *archs) {
    // A cubin for X.y runs on X.z with z >= y (an arch-specific one, "a", on X.y alone); PTX
    // for X.y is compiled by the driver for any newer GPU (arch-specific and family PTX only
    // within what their SASS would run on).
    const bool same_family = major == a.major && minor >= a.minor;
    const bool runs = a.suffix == 'a' ? major == a.major && minor == a.minor : same_family;
    if (a.sass && runs) return KernelCode::kSass;
    const bool newer = major > a.major || same_family;
    if (a.ptx && (a.suffix == '\0' ? newer : runs)) best = KernelCode::kPtxJit;
  }
  return best;
}

DevicesVerdict JudgeDevices(const CudaProbe& p) {
  DevicesVerdict v;
  v.lines.push_back("cpu backend: usable (OpenBLAS and MPI)");
  v.lines.push_back(BackendLine(p));
  if (!p.have_backend) {
    v.status = DevicesStatus::kNoCudaBackend;
    v.reason = fmt::format("this build has no cuda backend ({})", kNoToolkit);
  } else {
    v.lines.push_back(p.driver_version > 0
                          ? fmt::format("driver: runs CUDA {} at most", CudaVersionText(p.driver_version))
                          : "driver: none loaded (cudaDriverGetVersion reports none)");
    if (p.visible_devices) v.lines.push_back(fmt::format("CUDA_VISIBLE_DEVICES: '{}'", *p.visible_devices));
    if (p.count_error != cuda_error::kSuccess) {
      std::tie(v.status, v.reason) = CountFailure(p);
    } else if (p.gpus.empty()) {
      v.status = DevicesStatus::kNoGpu;
      v.reason = "no CUDA device was found (cudaGetDeviceCount found 0)";
    } else {
      JudgeGpus(p, &v);
    }
    if (p.gpus.empty()) v.lines.push_back("GPUs: none");
  }
  if (v.status == DevicesStatus::kUsable) {
    v.lines.push_back(fmt::format("verdict: the cuda backend is usable here ({} GPU(s))", p.gpus.size()));
  } else {
    v.lines.push_back("verdict: the cuda backend is not usable here: " + v.reason);
  }
  return v;
}

}  // namespace stagecraft::exec
