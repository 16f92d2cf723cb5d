// exec/rank_run_io.cpp: a rank's measurements survive the trip to rank 0 exactly; truncated
// bytes are caught by the always-on check instead of being read past their end.
#include <gtest/gtest.h>

#include "stagecraft/exec/runtime.h"

namespace stagecraft::exec {
namespace {

TEST(RankRunIoTest, RoundTripKeepsEveryField) {
  RankRun run;
  schedules::RankRecord& rec = run.record;
  rec.ops = {{0, 10}, {-1, -1}, {12, 40}};
  rec.memory = {{0, 100}, {5, 250}};
  rec.busy_ns = 38;
  rec.first_f_start_ns = 0;
  rec.last_compute_end_ns = 40;
  rec.peak_memory_bytes = 250;
  rec.peak_inflight = 3;
  rec.peak_weight_versions = 2;
  rec.oom = true;
  rec.losses = {0.5, 0.25};
  run.final_params = {{1.5f, -2.0f}, {3.0f}};
  run.clock_origin_ns = 123'456'789;
  run.clock_id = "5f1c0a7e-boot";
  const RankRun back_run = ParseRankRun(SerializeRankRun(run));
  const schedules::RankRecord& back = back_run.record;
  ASSERT_EQ(back.ops.size(), 3u);
  EXPECT_EQ(back.ops[2].start_ns, 12);
  EXPECT_EQ(back.ops[1].end_ns, -1);
  EXPECT_EQ(back.memory, rec.memory);
  EXPECT_EQ(back.busy_ns, 38);
  EXPECT_EQ(back.first_f_start_ns, 0);
  EXPECT_EQ(back.last_compute_end_ns, 40);
  EXPECT_EQ(back.peak_memory_bytes, 250);
  EXPECT_EQ(back.peak_inflight, 3);
  EXPECT_EQ(back.peak_weight_versions, 2);
  EXPECT_TRUE(back.oom);
  EXPECT_EQ(back.losses, rec.losses);
  EXPECT_EQ(back_run.final_params, run.final_params);
  EXPECT_EQ(back_run.clock_origin_ns, 123'456'789);
  EXPECT_EQ(back_run.clock_id, "5f1c0a7e-boot");
}

// This machine's clock id: a Linux kernel's boot id (a UUID), the same for every call.
TEST(RankRunIoTest, ClockIdIsTheBootId) {
  const std::string id = ClockId();
  EXPECT_EQ(id.size(), 36u);
  EXPECT_EQ(id, ClockId());
}

TEST(RankRunIoTest, TruncatedBytesFailTheCheck) {
  RankRun run;
  run.record.losses = {1.0, 2.0};
  const std::string bytes = SerializeRankRun(run);
  EXPECT_DEATH(ParseRankRun(bytes.substr(0, bytes.size() - 3)), "well formed");
}

}  // namespace
}  // namespace stagecraft::exec
