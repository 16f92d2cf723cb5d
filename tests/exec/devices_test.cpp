// Tests for exec/src/devices.cpp: the verdict on a machine's GPUs from hand-made probes, one per
// way a GPU can be missing or unusable (what the CUDA runtime documents each call to return),
// and the architecture rules against NVIDIA's compatibility rules (a cubin for X.y runs on X.z,
// z >= y; PTX is compiled by the driver for any newer GPU).
#include "stagecraft/exec/devices.h"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>

namespace stagecraft::exec {
namespace {

CudaProbe Built(std::string archs = "90") {
  CudaProbe p;
  p.have_backend = true;
  p.have_nccl = true;
  p.architectures = std::move(archs);
  p.runtime_version = 13000;
  p.driver_version = 13000;
  p.nccl_version = 22809;
  return p;
}

// A build whose cudaGetDeviceCount fails because the driver, running CUDA `driver_version` at
// most (0: none loaded), is older than the runtime.
CudaProbe InsufficientDriver(int driver_version) {
  CudaProbe p = Built();
  p.driver_version = driver_version;
  p.count_error = cuda_error::kInsufficientDriver;
  p.count_error_text = "cudaErrorInsufficientDriver 'CUDA driver version is insufficient for CUDA runtime version'";
  return p;
}

GpuProbe Gpu(int index, int major, int minor, std::string name = "NVIDIA H100 80GB HBM3") {
  GpuProbe g;
  g.index = index;
  g.name = std::move(name);
  g.pci_bus_id = "0000:3" + std::to_string(index) + ":00.0";
  g.memory_bytes = int64_t{80} << 30;
  g.major = major;
  g.minor = minor;
  return g;
}

bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

void ExpectVerdictLast(const DevicesVerdict& v) {
  ASSERT_FALSE(v.lines.empty());
  const std::string& last = v.lines.back();
  EXPECT_EQ(last.rfind("verdict: ", 0), 0u) << last;
  if (v.status == DevicesStatus::kUsable) {
    EXPECT_TRUE(v.reason.empty());
    EXPECT_TRUE(Has(last, "is usable")) << last;
  } else {
    EXPECT_FALSE(v.reason.empty());
    EXPECT_TRUE(Has(last, v.reason)) << last;
  }
}

TEST(DevicesTest, ExitCodesAreDistinctAndZeroOnlyWhenUsable) {
  const std::set<int> codes = {DevicesExitCode(DevicesStatus::kUsable), DevicesExitCode(DevicesStatus::kNoCudaBackend),
                               DevicesExitCode(DevicesStatus::kNoGpu), DevicesExitCode(DevicesStatus::kUnusable)};
  EXPECT_EQ(codes.size(), 4u);
  EXPECT_EQ(DevicesExitCode(DevicesStatus::kUsable), 0);
  EXPECT_EQ(DevicesExitCode(DevicesStatus::kNoCudaBackend), 3);
  EXPECT_EQ(DevicesExitCode(DevicesStatus::kNoGpu), 4);
  EXPECT_EQ(DevicesExitCode(DevicesStatus::kUnusable), 5);
}

TEST(DevicesTest, VersionsReadAsTheLibrariesEncodeThem) {
  EXPECT_EQ(CudaVersionText(13000), "13.0");
  EXPECT_EQ(CudaVersionText(12040), "12.4");
  EXPECT_EQ(CudaVersionText(0), "none");
  EXPECT_EQ(NcclVersionText(22809), "2.28.9");  // NCCL_VERSION(2, 28, 9) since 2.9
  EXPECT_EQ(NcclVersionText(2708), "2.7.8");    // the older encoding
  EXPECT_EQ(NcclVersionText(0), "none");
}

TEST(DevicesTest, ArchitecturesParseAsCMakeWritesThem) {
  const auto one = ParseCudaArchitectures("90");
  ASSERT_TRUE(one && one->size() == 1);
  EXPECT_EQ((*one)[0].major, 9);
  EXPECT_EQ((*one)[0].minor, 0);
  EXPECT_TRUE((*one)[0].sass && (*one)[0].ptx);
  const auto many = ParseCudaArchitectures("80-real;86, 90a-virtual,100f");
  ASSERT_TRUE(many && many->size() == 4);
  EXPECT_TRUE((*many)[0].sass && !(*many)[0].ptx);
  EXPECT_EQ((*many)[1].minor, 6);
  EXPECT_TRUE(!(*many)[2].sass && (*many)[2].ptx && (*many)[2].suffix == 'a');
  EXPECT_EQ((*many)[3].major, 10);
  EXPECT_EQ((*many)[3].suffix, 'f');
  EXPECT_TRUE(ParseCudaArchitectures("")->empty());
  EXPECT_FALSE(ParseCudaArchitectures("all").has_value());
  EXPECT_FALSE(ParseCudaArchitectures("80,native").has_value());
  EXPECT_THROW(ParseCudaArchitectures("9"), std::invalid_argument);
  EXPECT_THROW(ParseCudaArchitectures("sm_90"), std::invalid_argument);
  EXPECT_THROW(ParseCudaArchitectures("90-fast"), std::invalid_argument);
}

TEST(DevicesTest, KernelCodeFollowsTheCompatibilityRules) {
  const auto a = [](const char* list) { return ParseCudaArchitectures(list); };
  EXPECT_EQ(KernelCodeFor(a("90"), 9, 0), KernelCode::kSass);
  EXPECT_EQ(KernelCodeFor(a("80"), 8, 6), KernelCode::kSass);      // same major, newer minor
  EXPECT_EQ(KernelCodeFor(a("86-real"), 8, 0), KernelCode::kNone);  // older minor
  EXPECT_EQ(KernelCodeFor(a("90"), 8, 0), KernelCode::kNone);       // older GPU: nothing runs
  EXPECT_EQ(KernelCodeFor(a("90"), 10, 0), KernelCode::kPtxJit);    // newer GPU: the PTX
  EXPECT_EQ(KernelCodeFor(a("90-real"), 10, 0), KernelCode::kNone); // no PTX to compile
  EXPECT_EQ(KernelCodeFor(a("90a"), 9, 0), KernelCode::kSass);
  EXPECT_EQ(KernelCodeFor(a("90a"), 10, 0), KernelCode::kNone);     // arch-specific: 9.0 alone
  EXPECT_EQ(KernelCodeFor(a("100f"), 10, 3), KernelCode::kSass);    // the family
  EXPECT_EQ(KernelCodeFor(a("100f"), 12, 0), KernelCode::kNone);
  EXPECT_EQ(KernelCodeFor(a("80-virtual;90-real"), 9, 0), KernelCode::kSass);
  EXPECT_EQ(KernelCodeFor(a("80-virtual;90-real"), 8, 9), KernelCode::kPtxJit);
  EXPECT_EQ(KernelCodeFor(a("all"), 7, 0), KernelCode::kUnknown);
}

TEST(DevicesTest, ABuildWithoutCudaSaysSo) {
  const DevicesVerdict v = JudgeDevices(CudaProbe{});
  EXPECT_EQ(v.status, DevicesStatus::kNoCudaBackend);
  EXPECT_TRUE(Has(v.reason, "this build has no cuda backend")) << v.reason;
  EXPECT_TRUE(Has(v.lines.at(0), "cpu backend: usable"));
  EXPECT_TRUE(Has(v.lines.at(1), "not in this build"));
  ExpectVerdictLast(v);
}

TEST(DevicesTest, NoDriverIsNoGpu) {
  const DevicesVerdict v = JudgeDevices(InsufficientDriver(0));
  EXPECT_EQ(v.status, DevicesStatus::kNoGpu);
  EXPECT_EQ(v.reason.rfind("no CUDA device was found", 0), 0u) << v.reason;
  EXPECT_TRUE(Has(v.reason, "no NVIDIA driver is loaded")) << v.reason;
  EXPECT_TRUE(Has(v.reason, "cudaErrorInsufficientDriver"));
  ExpectVerdictLast(v);
}

TEST(DevicesTest, ADriverOlderThanTheToolkitIsUnusableAndNamesBothVersions) {
  const DevicesVerdict v = JudgeDevices(InsufficientDriver(12020));
  EXPECT_EQ(v.status, DevicesStatus::kUnusable);
  EXPECT_TRUE(Has(v.reason, "runs CUDA 12.2 at most, older than this build's CUDA runtime 13.0")) << v.reason;
  EXPECT_TRUE(Has(v.reason, "cudaErrorInsufficientDriver"));
  EXPECT_TRUE(Has(v.lines.at(2), "driver: runs CUDA 12.2 at most")) << v.lines.at(2);
  ExpectVerdictLast(v);
}

TEST(DevicesTest, NoDeviceNamesAHidingCudaVisibleDevices) {
  CudaProbe p = Built();
  p.count_error = cuda_error::kNoDevice;
  p.count_error_text = "cudaErrorNoDevice 'no CUDA-capable device is detected'";
  p.visible_devices = "";
  const DevicesVerdict v = JudgeDevices(p);
  EXPECT_EQ(v.status, DevicesStatus::kNoGpu);
  EXPECT_TRUE(Has(v.reason, "CUDA_VISIBLE_DEVICES=''")) << v.reason;
  CudaProbe zero = Built();  // cudaGetDeviceCount succeeded with 0
  EXPECT_EQ(JudgeDevices(zero).status, DevicesStatus::kNoGpu);
  ExpectVerdictLast(v);
}

TEST(DevicesTest, OtherCountErrorsAreUnusableWithWhatToDo) {
  CudaProbe p = Built();
  p.count_error = cuda_error::kSystemNotReady;
  p.count_error_text = "cudaErrorSystemNotReady 'system not yet initialized'";
  DevicesVerdict v = JudgeDevices(p);
  EXPECT_EQ(v.status, DevicesStatus::kUnusable);
  EXPECT_TRUE(Has(v.reason, "nvidia-fabricmanager")) << v.reason;
  p.count_error = cuda_error::kSystemDriverMismatch;
  p.count_error_text =
      "cudaErrorSystemDriverMismatch 'system has unsupported display driver / cuda driver combination'";
  v = JudgeDevices(p);
  EXPECT_TRUE(Has(v.reason, "different driver versions")) << v.reason;
  p.count_error = 999;
  p.count_error_text = "cudaErrorUnknown 'unknown error'";
  v = JudgeDevices(p);
  EXPECT_EQ(v.status, DevicesStatus::kUnusable);
  EXPECT_TRUE(Has(v.reason, "cudaGetDeviceCount: cudaErrorUnknown")) << v.reason;
  ExpectVerdictLast(v);
}

TEST(DevicesTest, AGpuWithKernelsForItIsUsableAndDescribed) {
  CudaProbe p = Built();
  p.gpus.push_back(Gpu(0, 9, 0));
  p.gpus[0].free_bytes = int64_t{79} << 30;
  const DevicesVerdict v = JudgeDevices(p);
  EXPECT_EQ(v.status, DevicesStatus::kUsable);
  ASSERT_EQ(v.gpus.size(), 1u);
  EXPECT_TRUE(v.gpus[0].usable);
  EXPECT_TRUE(v.gpus[0].note.empty()) << v.gpus[0].note;
  const std::string& line = v.lines.at(v.lines.size() - 2);
  for (const char* part : {"GPU 0: NVIDIA H100 80GB HBM3", "80.00 GiB", "79.00 GiB free", "compute capability 9.0",
                           "0000:30:00.0", ": usable"}) {
    EXPECT_TRUE(Has(line, part)) << part << " in " << line;
  }
  ExpectVerdictLast(v);
}

TEST(DevicesTest, AProhibitedGpuIsUnusable) {
  CudaProbe p = Built();
  p.gpus.push_back(Gpu(0, 9, 0));
  p.gpus[0].compute_mode = ComputeMode::kProhibited;
  const DevicesVerdict v = JudgeDevices(p);
  EXPECT_EQ(v.status, DevicesStatus::kUnusable);
  EXPECT_TRUE(Has(v.reason, "GPU 0 (NVIDIA H100 80GB HBM3): its compute mode is Prohibited")) << v.reason;
  ExpectVerdictLast(v);
}

TEST(DevicesTest, AGpuOlderThanTheBuildsArchitecturesIsUnusableAndTheFixIsNamed) {
  CudaProbe p = Built("90");
  p.gpus.push_back(Gpu(0, 8, 0, "NVIDIA A100-SXM4-80GB"));
  const DevicesVerdict v = JudgeDevices(p);
  EXPECT_EQ(v.status, DevicesStatus::kUnusable);
  EXPECT_TRUE(Has(v.reason, "compute capability 8.0, and this build has kernels for sm_90, compute_90 (PTX) only"))
      << v.reason;
  EXPECT_TRUE(Has(v.reason, "-DCMAKE_CUDA_ARCHITECTURES=\"90;80\"")) << v.reason;
  ExpectVerdictLast(v);
}

TEST(DevicesTest, ANewerGpuRunsThePtxWithANote) {
  CudaProbe p = Built("90");
  p.gpus.push_back(Gpu(0, 10, 0, "NVIDIA B200"));
  const DevicesVerdict v = JudgeDevices(p);
  EXPECT_EQ(v.status, DevicesStatus::kUsable);
  EXPECT_TRUE(Has(v.gpus.at(0).note, "compiled from PTX")) << v.gpus.at(0).note;
  p.architectures = "90-real";
  EXPECT_EQ(JudgeDevices(p).status, DevicesStatus::kUnusable);
}

TEST(DevicesTest, OneUnusableGpuOfTwoMakesTheBackendUnusableAndNamesTheOthers) {
  CudaProbe p = Built();
  p.gpus.push_back(Gpu(0, 9, 0));
  p.gpus.push_back(Gpu(1, 9, 0));
  p.gpus[1].compute_mode = ComputeMode::kProhibited;
  const DevicesVerdict v = JudgeDevices(p);
  EXPECT_EQ(v.status, DevicesStatus::kUnusable);
  EXPECT_TRUE(v.gpus.at(0).usable);
  EXPECT_FALSE(v.gpus.at(1).usable);
  EXPECT_EQ(v.reason.rfind("GPU 1 (", 0), 0u) << v.reason;
  EXPECT_TRUE(Has(v.reason, "CUDA_VISIBLE_DEVICES=0")) << v.reason;
  ExpectVerdictLast(v);
}

TEST(DevicesTest, AContextThatCannotBeMadeIsUnusableWithTheCall) {
  CudaProbe p = Built();
  p.gpus.push_back(Gpu(0, 9, 0));
  p.gpus[0].compute_mode = ComputeMode::kExclusiveProcess;
  p.gpus[0].error = cuda_error::kDevicesUnavailable;
  p.gpus[0].error_text =
      "cudaSetDevice: cudaErrorDevicesUnavailable 'CUDA-capable device(s) is/are busy or unavailable'";
  const DevicesVerdict v = JudgeDevices(p);
  EXPECT_EQ(v.status, DevicesStatus::kUnusable);
  EXPECT_TRUE(Has(v.reason, "cudaSetDevice: cudaErrorDevicesUnavailable")) << v.reason;
  EXPECT_TRUE(Has(v.reason, "exclusive-process compute mode")) << v.reason;
}

TEST(DevicesTest, ExclusiveModeAndUncheckedArchitecturesAreNotesOnly) {
  CudaProbe p = Built("all-major");
  p.gpus.push_back(Gpu(0, 9, 0));
  p.gpus[0].compute_mode = ComputeMode::kExclusiveProcess;
  const DevicesVerdict v = JudgeDevices(p);
  EXPECT_EQ(v.status, DevicesStatus::kUsable);
  EXPECT_TRUE(Has(v.gpus.at(0).note, "ranks cannot share it")) << v.gpus.at(0).note;
  EXPECT_TRUE(Has(v.gpus.at(0).note, "not checked")) << v.gpus.at(0).note;
}

TEST(DevicesTest, TheBackendLineNamesTheLibraries) {
  CudaProbe p = Built("80;90");
  p.gpus.push_back(Gpu(0, 9, 0));
  DevicesVerdict v = JudgeDevices(p);
  EXPECT_TRUE(Has(v.lines.at(1), "CUDA runtime 13.0")) << v.lines.at(1);
  EXPECT_TRUE(Has(v.lines.at(1), "sm_80, compute_80 (PTX), sm_90")) << v.lines.at(1);
  EXPECT_TRUE(Has(v.lines.at(1), "NCCL 2.28.9")) << v.lines.at(1);
  p.have_nccl = false;
  v = JudgeDevices(p);
  EXPECT_TRUE(Has(v.lines.at(1), "no NCCL")) << v.lines.at(1);
  EXPECT_EQ(v.status, DevicesStatus::kUsable);  // the host-staged transport serves
}

}  // namespace
}  // namespace stagecraft::exec
