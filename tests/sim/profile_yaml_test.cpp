// Tests for scenario/src/profile_yaml.cpp: a profile read back from what ProfileToYaml writes is the
// same, to the nanosecond and the byte; sizes are bounded per value as they are read; the
// optional all-reduce fit reads, writes and refuses bad values where they stand.
#include "stagecraft/scenario/profile_yaml.h"

#include <gtest/gtest.h>

#include <string>

#include "sim_test_util.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;
using testing::PosOf;
using testing::ScratchDir;

// Every per-layer key, the transformer's embedding and head, and a layer left at its defaults.
const char kProfile[] = R"(device: gpu-0
microbatch_size: 4
send_bytes: 512
embedding: {forward: 3us, backward_input: 0, backward_weight: 4us, activation_bytes: 64, weight_bytes: 4KiB}
layers:
  - {forward: 1ms, backward_input: 2ms, backward_weight: 3ms, step: 2ms, copy: 7us, activation_bytes: 1KiB,
     weight_bytes: 10KiB, w_stash_bytes: 7, grad_bytes: 500, optimizer_bytes: 2000, workspace_bytes: 99}
  - {forward: 5ns, backward_input: 6ns, backward_weight: 7ns, activation_bytes: 1, weight_bytes: 2}
head: {forward: 11us, backward_input: 12us, backward_weight: 13us, activation_bytes: 3, weight_bytes: 5KiB}
)";

// Sizes near 2^63 overflowed the per-stage sums (UB); a profile's sizes are at most 1 PiB each,
// and a stage's sums are taken in double and checked (cost_checks_test).
TEST(ProfileYaml, SizesAreBoundedSoThatStageSumsCannotOverflow) {
  const std::string text = std::string(kProfile).replace(std::string(kProfile).find("weight_bytes: 10KiB"), 19,
                                                         "weight_bytes: 6000000000000000000");
  EXPECT_EQ(ErrorOf([&] { ProfileFromYaml(text, "p.yaml"); }),
            "p.yaml:" + PosOf(text, "6000000000000000000") +
                ": layers.0.weight_bytes: expected a size of at most 1PiB (the limit per value), got "
                "'6000000000000000000'");
  EXPECT_EQ(ProfileFromYaml(std::string(kProfile).replace(std::string(kProfile).find("512"), 3, "1PiB"), "p.yaml")
                .send_bytes,
            int64_t{1} << 50);
}

TEST(ProfileYaml, RoundTrip) {
  ScratchDir dir;
  const Profile p = LoadProfile(dir.Write("profile.yaml", kProfile));
  EXPECT_EQ(p.device, "gpu-0");
  ASSERT_EQ(p.layers.size(), 2u);
  EXPECT_EQ(p.layers[0].version_copy_ns, 7000);
  EXPECT_EQ(p.layers[0].workspace_bytes, 99);
  EXPECT_EQ(p.layers[1].grad_bytes, 2);  // defaults to weight_bytes
  ASSERT_TRUE(p.embedding && p.head);
  EXPECT_EQ(p.head->backward_weight_ns, 13000);
  const Profile again = LoadProfile(dir.Write("again.yaml", ProfileToYaml(p)));
  EXPECT_EQ(again.device, p.device);
  EXPECT_EQ(again.microbatch_size, p.microbatch_size);
  EXPECT_EQ(again.send_bytes, p.send_bytes);
  ASSERT_EQ(again.layers.size(), p.layers.size());
  ASSERT_TRUE(again.embedding && again.head);
  for (const auto field : kLayerProfileFields) {
    for (size_t i = 0; i < p.layers.size(); ++i) EXPECT_EQ(again.layers[i].*field, p.layers[i].*field) << i;
    EXPECT_EQ(again.embedding.value().*field, p.embedding.value().*field);
    EXPECT_EQ(again.head.value().*field, p.head.value().*field);
  }
}

// ProfileToYaml writes step in exact nanoseconds, so odd values and 0 survive a round trip.
TEST(ProfileYaml, RoundTripKeepsStep) {
  ScratchDir dir;
  Profile p = LoadProfile(dir.Write("profile.yaml", kProfile));
  EXPECT_EQ(p.layers[0].step_ns, 2'000'000);
  EXPECT_EQ(p.layers[1].step_ns, 0);
  p.layers[0].step_ns = 1'234'567'891;
  p.layers[1].step_ns = 1;
  const Profile again = LoadProfile(dir.Write("again.yaml", ProfileToYaml(p)));
  ASSERT_EQ(again.layers.size(), p.layers.size());
  for (size_t i = 0; i < p.layers.size(); ++i) EXPECT_EQ(again.layers[i].step_ns, p.layers[i].step_ns) << "layer " << i;
}

// ---- allreduce ------------------------------------------------------------------------

const std::string kWithAllReduce = std::string(kProfile) + "allreduce: {latency: 25us, bus_bandwidth: 2.5GB/s, ranks: 2}\n";

// Read as written: 25 us = 25000 ns, 2.5 GB/s = 2.5e9 B/s; written back in exact ns and whole B/s,
// it reads the same and writes the same text.
TEST(ProfileYaml, AllReduceRoundTrip) {
  ScratchDir dir;
  const Profile p = LoadProfile(dir.Write("profile.yaml", kWithAllReduce));
  ASSERT_TRUE(p.allreduce.has_value());
  EXPECT_EQ(p.allreduce->latency_ns, 25'000);
  EXPECT_DOUBLE_EQ(p.allreduce->bus_bytes_per_s, 2.5e9);
  EXPECT_EQ(p.allreduce->ranks, 2);
  const std::string yaml = ProfileToYaml(p);
  EXPECT_NE(yaml.find("allreduce: {latency: 25000ns, bus_bandwidth: 2500000000B/s, ranks: 2}"), std::string::npos)
      << yaml;
  const Profile again = LoadProfile(dir.Write("again.yaml", yaml));
  ASSERT_TRUE(again.allreduce.has_value());
  EXPECT_EQ(again.allreduce->latency_ns, 25'000);
  EXPECT_DOUBLE_EQ(again.allreduce->bus_bytes_per_s, 2.5e9);
  EXPECT_EQ(again.allreduce->ranks, 2);
  EXPECT_EQ(ProfileToYaml(again), yaml);
}

// The bus bandwidth the calibration runs' REDUCE_GRADs showed, written only when measured.
TEST(ProfileYaml, AllReduceInPipelineBandwidthRoundTrips) {
  const Profile p = ProfileFromYaml(std::string(kProfile) +
                                        "allreduce: {latency: 25us, bus_bandwidth: 2.5GB/s, ranks: 2, "
                                        "in_pipeline_bus_bandwidth: 1GB/s}\n",
                                    "p.yaml");
  ASSERT_TRUE(p.allreduce.has_value());
  EXPECT_DOUBLE_EQ(p.allreduce->pipeline_bus_bytes_per_s, 1e9);
  EXPECT_DOUBLE_EQ(p.allreduce->DataBusBytesPerS(), 1e9);
  const std::string yaml = ProfileToYaml(p);
  EXPECT_NE(yaml.find("ranks: 2, in_pipeline_bus_bandwidth: 1000000000B/s}"), std::string::npos) << yaml;
  EXPECT_EQ(ProfileFromYaml(yaml, "again.yaml").allreduce->pipeline_bus_bytes_per_s, 1e9);
}

// A profile without it reads as none and writes none (today's profiles predict as before).
TEST(ProfileYaml, AllReduceAbsentIsNone) {
  const Profile p = ProfileFromYaml(kProfile, "p.yaml");
  EXPECT_FALSE(p.allreduce.has_value());
  EXPECT_EQ(ProfileToYaml(p).find("allreduce"), std::string::npos);
}

// Bad values: one line naming file:line:col, the key and what it expects.
TEST(ProfileYaml, AllReduceBadValuesAreLocated) {
  const auto error = [](const std::string& text) { return ErrorOf([&] { ProfileFromYaml(text, "p.yaml"); }); };
  const auto at = [](const std::string& text, const std::string& needle) { return "p.yaml:" + PosOf(text, needle) + ": "; };
  std::string bad = testing::Replace(kWithAllReduce, "ranks: 2", "ranks: 1");
  EXPECT_EQ(error(bad), at(bad, "1}") + "allreduce.ranks: expected an integer in [2, 65536], got '1'");
  bad = testing::Replace(kWithAllReduce, "2.5GB/s", "999B/s");
  EXPECT_EQ(error(bad), at(bad, "999B/s") + "allreduce.bus_bandwidth: expected a bandwidth from 1KB/s to 10PB/s, got '999B/s'");
  bad = testing::Replace(kWithAllReduce, "latency: 25us", "latency: -1us");
  EXPECT_EQ(error(bad).rfind(at(bad, "-1us") + "allreduce.latency: expected a duration", 0), 0u) << error(bad);
  bad = testing::Replace(kWithAllReduce, ", ranks: 2", "");
  EXPECT_EQ(error(bad), at(bad, "{latency: 25us") + "allreduce: missing required key 'ranks'");
  bad = testing::Replace(kWithAllReduce, "bus_bandwidth", "bus_bandwith");
  EXPECT_EQ(error(bad), at(bad, "bus_bandwith") +
                            "allreduce: unknown key 'bus_bandwith' (known: latency, bus_bandwidth, ranks, "
                            "in_pipeline_bus_bandwidth); did you mean 'bus_bandwidth'?");
}

}  // namespace
}  // namespace stagecraft::sim
