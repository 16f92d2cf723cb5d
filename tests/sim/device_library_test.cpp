// The device library (DESIGN.md §9): `topology.device: NAME` reads scenarios/devices/NAME.yaml
// (or devices/ beside the file that names it), --set reaches into its fields, a peak by dtype
// follows the run's precision, and every bad device names its file, line and what is wrong.
// Oracles: the datasheet values the files state (typed here from the datasheets), and the
// errors' texts.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "sim_test_util.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/sim/scenario_checks.h"
#include "stagecraft/scenario/validate.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;
using testing::LoadError;
using testing::ScratchDir;

std::string ScenarioText(const std::string& device, const std::string& dtype = "bf16") {
  return "name: s\n"
         "topology: {device: " + device + ", devices_per_node: 2, links: [{scope: node, bandwidth: 100GB/s, latency: 1us}]}\n"
         "model: {transformer: {layers: 4, hidden: 1024, heads: 16, seq: 1024, vocab: 32000}}\n"
         "pipeline: {schedule: 1f1b, ranks: 2, microbatches: 4, microbatch_size: 2}\n"
         "training: {optimizer: adam, lr: 0.001, dtype: " + dtype + "}\n";
}

sim::Scenario Load(const ScratchDir& dir, const std::string& text, const std::vector<std::string>& sets = {}) {
  return LoadScenario(dir.Write("scenario.yaml", text), sets);
}

TEST(DeviceLibrary, EveryShippedDeviceLoadsWithItsDatasheetValues) {
  ScratchDir dir;
  struct Want {
    std::string name;
    double bf16, fp32, bandwidth;
    int64_t memory;
    int sms;
    double fp8;  // dense, half the datasheets' sparse figure; 0: no FP8 tensor cores (Ampere)
  };
  const std::vector<Want> wants = {
      {"A100-SXM-80GB", 312e12, 19.5e12, 2039e9, int64_t{80} << 30, 108, 0},
      {"H100-SXM", 989.4e12, 67e12, 3.35e12, int64_t{80} << 30, 132, 1978.9e12},
      {"H200", 989.4e12, 67e12, 4.8e12, int64_t{141'000'000'000}, 132, 1978.9e12},
      {"L40S", 362.05e12, 91.6e12, 864e9, int64_t{48'000'000'000}, 142, 733e12},
  };
  for (const Want& w : wants) {
    const sim::Scenario s = Load(dir, ScenarioText(w.name));
    const DeviceSpec& d = s.topology.device;
    EXPECT_EQ(d.name, w.name);
    // The library file it came from (the source tree's: the scratch folder has no devices/).
    EXPECT_TRUE(d.source.ends_with("scenarios/devices/" + w.name + ".yaml")) << d.source;
    EXPECT_DOUBLE_EQ(d.peak_flops, w.bf16) << w.name;  // the run's precision picks the peak
    EXPECT_DOUBLE_EQ(d.peak_by_dtype[static_cast<int>(Dtype::kFp32)], w.fp32) << w.name;
    EXPECT_DOUBLE_EQ(d.peak_by_dtype[static_cast<int>(Dtype::kFp8)], w.fp8) << w.name;
    EXPECT_DOUBLE_EQ(d.memory_bandwidth, w.bandwidth) << w.name;
    EXPECT_EQ(d.memory_bytes, w.memory) << w.name;
    EXPECT_EQ(d.gemm.sms, w.sms) << w.name;
    EXPECT_TRUE(d.roofline()) << w.name;
    EXPECT_EQ(BuildCosts(s, 2).source, "roofline") << w.name;
  }
  // The CPU core states fp32 only: a bf16 run on it is refused, an fp32 one runs.
  EXPECT_DOUBLE_EQ(Load(dir, ScenarioText("cpu-core", "fp32")).topology.device.peak_flops, 166.4e9);  // 2 x 16 x 2 x 2.6 GHz
  EXPECT_NE(LoadError(dir, ScenarioText("cpu-core", "bf16")).find("device cpu-core states no peak for the scenario's "
                                                              "precision bf16 (it states fp32)"),
            std::string::npos);
}

TEST(DeviceLibrary, TheRunsPrecisionPicksThePeak) {
  ScratchDir dir;
  EXPECT_DOUBLE_EQ(Load(dir, ScenarioText("A100-SXM-80GB", "tf32")).topology.device.peak_flops, 156e12);
  EXPECT_DOUBLE_EQ(Load(dir, ScenarioText("A100-SXM-80GB", "fp32")).topology.device.peak_flops, 19.5e12);
  EXPECT_DOUBLE_EQ(Load(dir, ScenarioText("A100-SXM-80GB", "fp16")).topology.device.peak_flops, 312e12);
}

TEST(DeviceLibrary, SetReachesIntoALibraryDeviceOrReplacesIt) {
  ScratchDir dir;
  const std::string text = ScenarioText("A100-SXM-80GB");
  EXPECT_DOUBLE_EQ(Load(dir, text, {"topology.device.memory_bandwidth=1TB/s"}).topology.device.memory_bandwidth, 1e12);
  EXPECT_DOUBLE_EQ(Load(dir, text, {"topology.device.gemm.max_efficiency=0.5"}).topology.device.gemm.max_efficiency,
                   0.5);
  const sim::Scenario h = Load(dir, text, {"topology.device=H100-SXM"});
  EXPECT_EQ(h.topology.device.name, "H100-SXM");
  EXPECT_DOUBLE_EQ(h.topology.device.peak_flops, 989.4e12);
  // Replaced by an inline device: the flat FLOPs model, no library source.
  const sim::Scenario flat = Load(dir, text, {"topology.device={name: x, peak: 1TFLOPS, memory: 1GiB}"});
  EXPECT_EQ(flat.topology.device.source, "");
  EXPECT_FALSE(flat.topology.device.roofline());
  EXPECT_EQ(BuildCosts(flat, 2).source, "transformer");
  EXPECT_EQ(ErrorOf([&] { Load(dir, text, {"topology.device.gemm.max_efficiency=2"}); }),
            "--set topology.device.gemm.max_efficiency: expected a fraction of peak from 0.001 to 1, got '2'");
}

// memory_kernels: a map of the list's memory-bound kernels to rates; a name the list does not
// have, a GEMM's name, a name twice, a rate out of range and a list are each one error there.
TEST(DeviceLibrary, MemoryKernelsNameTheListsMemoryBoundKernels) {
  ScratchDir dir;
  const std::string text = ScenarioText("A100-SXM-80GB");
  const sim::Scenario s = Load(dir, text, {"topology.device.memory_kernels={softmax: 0.5, ln1.dX: 1.25}"});
  EXPECT_EQ(s.topology.device.memory_kernel_rates,
            (std::vector<std::pair<std::string, double>>{{"softmax", 0.5}, {"ln1.dX", 1.25}}));
  EXPECT_DOUBLE_EQ(s.topology.device.MemoryKernelRate("recompute.softmax"), 0.5);
  EXPECT_DOUBLE_EQ(s.topology.device.MemoryKernelRate("softmax.dX"), 1.0);
  const std::string unknown = ErrorOf([&] { Load(dir, text, {"topology.device.memory_kernels={softmaxx: 0.5}"}); });
  EXPECT_NE(unknown.find("'softmaxx' is not a memory-bound kernel of the list (one of: attention_dropout, "),
            std::string::npos) << unknown;
  EXPECT_NE(ErrorOf([&] { Load(dir, text, {"topology.device.memory_kernels={qkv: 0.5}"}); })
                .find("'qkv' is not a memory-bound kernel of the list"), std::string::npos);
  dir.Write("devices/twice.yaml",
            "name: twice\npeak: 1TFLOPS\nmemory: 1GiB\nmemory_bandwidth: 1TB/s\n"
            "gemm: {max_efficiency: 0.5, sms: 10, tiles: [[64, 64]]}\nmemory_kernels: {ln1: 0.5, ln1: 0.6}\n");
  const std::string twice = LoadError(dir, ScenarioText("twice"));
  EXPECT_NE(twice.find("'ln1' is named twice"), std::string::npos) << twice;
  EXPECT_EQ(ErrorOf([&] { Load(dir, text, {"topology.device.memory_kernels={ln1: 3}"}); }),
            "--set topology.device.memory_kernels: topology.device.memory_kernels.ln1: expected a rate relative to "
            "memory_efficiency's from 0.001 to 2, got '3'");
  EXPECT_NE(ErrorOf([&] { Load(dir, text, {"topology.device.memory_kernels=[0.5]"}); })
                .find("expected a map of memory-bound kernel names to rates, such as {softmax: 0.5}, got a list"),
            std::string::npos);
}

TEST(DeviceLibrary, ALocalDevicesFolderComesFirstAndItsErrorsNameItsFile) {
  ScratchDir dir;
  const std::string device =
      "name: mine\n"
      "peak: {bf16: 100TFLOPS}\n"
      "memory: 16GiB\n"
      "memory_bandwidth: 1TB/s\n"
      "gemm: {max_efficiency: 0.5, sms: 10, tiles: [[64, 64]]}\n";
  const std::string mine = dir.Write("devices/mine.yaml", device);
  const sim::Scenario s = Load(dir, ScenarioText("mine"));
  EXPECT_DOUBLE_EQ(s.topology.device.peak_flops, 100e12);
  EXPECT_EQ(s.topology.device.source, mine);  // the file read, where a shipped one could have been
  EXPECT_EQ(s.topology.device.gemm.tiles, (std::vector<std::pair<int, int>>{{64, 64}}));
  // A bad field: the device file's line and column.
  const std::string bad = dir.Write("devices/bad.yaml", testing::Replace(device, "sms: 10", "sms: -1"));
  EXPECT_EQ(LoadError(dir, ScenarioText("bad")),
            bad + ":" + testing::PosOf(testing::Replace(device, "sms: 10", "sms: -1"), "-1") +
                ": topology.device.gemm.sms: expected an integer in [1, 65536], got '-1'");
  // Half a roofline: memory_bandwidth without gemm.
  dir.Write("devices/half.yaml", "name: half\npeak: 1TFLOPS\nmemory: 1GiB\nmemory_bandwidth: 1TB/s\n");
  EXPECT_NE(LoadError(dir, ScenarioText("half")).find("the roofline model needs both memory_bandwidth and gemm"),
            std::string::npos);
  // An unknown device lists where it looked; a path is not a device name.
  const std::string unknown = LoadError(dir, ScenarioText("Z9000"));
  EXPECT_NE(unknown.find("no device 'Z9000' in the device library (looked for"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("devices/Z9000.yaml"), std::string::npos) << unknown;
  EXPECT_NE(LoadError(dir, ScenarioText("../mine")).find("expected a device name of letters"), std::string::npos);
}

}  // namespace
}  // namespace stagecraft::sim

namespace stagecraft::sim {
namespace {

// A roofline device built in code is checked like a loaded one: no tiles, no SMs, a bandwidth
// without the GEMM model are problems under their keys.
TEST(DeviceLibrary, ValidateChecksARooflineDeviceBuiltInCode) {
  Scenario s = testing::UnitScenario(2, "1f1b");
  s.model.mlp = MlpSpec{4, 16};
  s.topology.links = {LinkSpec{LinkScope::kNode, 1e9, 1000}};
  s.topology.device.memory_bandwidth = 1e12;  // half a roofline: no gemm
  std::vector<std::string> keys;
  for (const ScenarioProblem& p : Validate(s)) keys.push_back(p.key);
  EXPECT_NE(std::find(keys.begin(), keys.end(), "topology.device.gemm.max_efficiency"), keys.end());
  EXPECT_NE(std::find(keys.begin(), keys.end(), "topology.device.gemm.sms"), keys.end());
  EXPECT_NE(std::find(keys.begin(), keys.end(), "topology.device.gemm.tiles"), keys.end());
  s.topology.device.gemm.max_efficiency = 0.7;
  s.topology.device.gemm.sms = 10;
  s.topology.device.gemm.tiles = {{64, 64}};
  const std::vector<ScenarioProblem> problems = Validate(s);
  EXPECT_TRUE(problems.empty()) << (problems.empty() ? "" : problems.front().key + ": " + problems.front().message);
  // Kernel rates built in code: a name the list lacks and a rate out of range, each at its key.
  s.topology.device.memory_kernel_rates = {{"softmax", 0.5}, {"qkv", 0.5}, {"ln1", 0}};
  keys.clear();
  for (const ScenarioProblem& p : Validate(s)) keys.push_back(p.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"topology.device.memory_kernels.qkv", "topology.device.memory_kernels.ln1"}));
}

}  // namespace
}  // namespace stagecraft::sim
