// sim::ScenarioText (scenario.h): the scenario file as LoadScenario reads it, as one YAML text
// that loads the same scenario from another directory: a topology file and a library device put
// in place, the overrides applied (into the device's fields too), the profile's and the token
// file's names made absolute (a file's against its directory, an override's against the current
// one).
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "stagecraft/sim/scenario_checks.h"

namespace stagecraft::sim {
namespace {

class ScenarioTextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("scenario_text_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::create_directories(dir_ / "elsewhere");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // `text` written under the temporary directory, then loaded from there.
  Scenario Reload(const std::string& text) const {
    const std::string path = (dir_ / "elsewhere" / "written.yaml").string();
    std::ofstream(path) << text;
    return LoadScenario(path);
  }

  std::filesystem::path dir_;
};

TEST_F(ScenarioTextTest, ATopologyFileAndDeviceOverridesLoadTheSameFromElsewhere) {
  const std::string path = STAGECRAFT_SOURCE_DIR "/scenarios/published/megatron-sc21.yaml";
  const std::vector<std::string> sets = {"topology.nodes=4", "topology.device.memory=40GiB", "pipeline.ranks=2",
                                         "pipeline.data_parallel=16", "pipeline.microbatches=8"};
  const Scenario direct = LoadScenario(path, sets);
  const Scenario written = Reload(ScenarioText(path, sets));
  EXPECT_EQ(written.name, direct.name);
  EXPECT_EQ(written.topology.nodes, 4);
  EXPECT_EQ(written.topology.devices_per_node, direct.topology.devices_per_node);
  EXPECT_EQ(written.topology.device.memory_bytes, int64_t{40} << 30);
  EXPECT_EQ(written.topology.device.peak_flops, direct.topology.device.peak_flops);
  EXPECT_EQ(written.topology.device.memory_bandwidth, direct.topology.device.memory_bandwidth);
  EXPECT_EQ(written.topology.links.size(), direct.topology.links.size());
  EXPECT_EQ(written.pipeline.ranks, 2);
  EXPECT_EQ(written.pipeline.data_parallel, 16);
  EXPECT_EQ(written.pipeline.recompute, Recompute::kFull);
  EXPECT_EQ(written.model.transformer->layers, direct.model.transformer->layers);
  EXPECT_EQ(written.training.dtype, direct.training.dtype);
}

TEST_F(ScenarioTextTest, FileNamesBecomeAbsolute) {
  // A scenario beside its token file names it relative to itself.
  const std::filesystem::path home = dir_ / "home";
  std::filesystem::create_directories(home);
  std::ofstream(home / "tokens.bin") << "some text to train on";
  const std::string path = (home / "gpt.yaml").string();
  std::ofstream(path) << R"(name: gpt
topology: {device: {name: cpu, peak: 50GFLOPS, memory: 4GiB}, nodes: 1, devices_per_node: 2,
           links: [{scope: node, bandwidth: 10GB/s, latency: 5us}]}
model:
  transformer: {layers: 2, hidden: 64, heads: 4, seq: 16, vocab: 256, dropout: false}
pipeline: {schedule: 1f1b, ranks: 2, microbatches: 4}
training: {optimizer: sgd, lr: 0.1, dtype: fp32, data: tokens.bin}
)";
  const std::string beside = std::filesystem::absolute(home / "tokens.bin").lexically_normal().string();
  EXPECT_EQ(LoadScenario(path).training.data_path, beside);
  EXPECT_EQ(Reload(ScenarioText(path)).training.data_path, beside);
  // An override's name is the current directory's, as LoadScenario reads it.
  const std::string here = std::filesystem::absolute("tokens.bin").lexically_normal().string();
  EXPECT_NE(ScenarioText(path, {"training.data=tokens.bin"}).find(here), std::string::npos);
}

}  // namespace
}  // namespace stagecraft::sim
