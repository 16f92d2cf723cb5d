// viz/src/groups.cpp: which open traces overlay which, and where a replay goes: with a
// prediction, a measurement and a replay of one schedule open, the measurement overlays the
// prediction (not the replay, whatever the order they were opened in), the replay is that
// group's and is drawn as the block right under it; alone with a measurement, a replay is
// overlaid on it; traces of other schedules stay blocks of their own.
#include "stagecraft/viz/groups.h"

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace stagecraft::viz {
namespace {

using schedules::OpKind;

// A one-op trace of `schedule` from `source` ("predicted" or "measured") with cost label `costs`.
std::shared_ptr<const LoadedTrace> Trace(const std::string& source, const std::string& costs,
                                         const std::string& schedule) {
  schedules::Trace t;
  t.source = source;
  t.costs = costs;
  t.schedule = schedule;
  schedules::TraceOp op;
  op.op = schedules::Op{OpKind::kF, 0, 0, 0, 0, -1};
  op.duration_ns = 1000;
  t.ops = {op};
  LoadResult r = LoadTraceText(schedules::TraceToJson(t), source + ".json");  // through the file format
  EXPECT_EQ(r.error, "");
  return r.trace;
}

std::vector<const LoadedTrace*> Raw(const std::vector<std::shared_ptr<const LoadedTrace>>& traces) {
  std::vector<const LoadedTrace*> out;
  for (const auto& t : traces) out.push_back(t.get());
  return out;
}

TEST(GroupTraces, ReplayIsRecognisedByItsCosts) {
  EXPECT_TRUE(IsReplay(Trace("predicted", "replay:t.json", "1f1b")->trace));
  EXPECT_FALSE(IsReplay(Trace("predicted", "profile:p.yaml", "1f1b")->trace));
  EXPECT_FALSE(IsReplay(Trace("predicted", "", "1f1b")->trace));
  EXPECT_FALSE(IsReplay(Trace("measured", "replay:t.json", "1f1b")->trace));
  EXPECT_EQ(SourceLabel(Trace("predicted", "replay:t.json", "1f1b")->trace), "replay");
  EXPECT_EQ(SourceLabel(Trace("predicted", "mlp", "1f1b")->trace), "predicted");
}

TEST(GroupTraces, PredictionMeasurementAndReplaySideBySide) {
  // Opened replay first, then the measurement, then the prediction, then another schedule.
  const std::vector<std::shared_ptr<const LoadedTrace>> t = {
      Trace("predicted", "replay:m.json", "1f1b"), Trace("measured", "", "1f1b"), Trace("predicted", "mlp", "1f1b"),
      Trace("predicted", "mlp", "gpipe")};
  const Grouping g = GroupTraces(Raw(t));
  EXPECT_TRUE(g.messages.empty());
  ASSERT_EQ(g.groups.size(), 3u);
  EXPECT_EQ(g.groups[0].predicted, 2);  // the prediction, not the replay opened before it
  EXPECT_EQ(g.groups[0].measured, 1);
  EXPECT_EQ(g.groups[0].replay, 0);
  EXPECT_TRUE(g.groups[0].Overlaid());
  EXPECT_TRUE(g.groups[1].replay_block);  // right under its overlay
  EXPECT_EQ(g.groups[1].Lone(), 0);
  EXPECT_FALSE(g.groups[2].Overlaid());
  EXPECT_EQ(g.groups[2].Lone(), 3);
  EXPECT_FALSE(g.groups[2].replay_block);
}

TEST(GroupTraces, AReplayAloneWithTheRunIsOverlaidOnIt) {
  const std::vector<std::shared_ptr<const LoadedTrace>> t = {Trace("measured", "", "zb-h1"),
                                                             Trace("predicted", "replay:m.json", "zb-h1")};
  const Grouping g = GroupTraces(Raw(t));
  ASSERT_EQ(g.groups.size(), 1u);
  EXPECT_EQ(g.groups[0].predicted, 1);
  EXPECT_EQ(g.groups[0].measured, 0);
  EXPECT_EQ(g.groups[0].replay, -1);
}

TEST(GroupTraces, AReplayOfAnotherScheduleStaysApart) {
  const std::vector<std::shared_ptr<const LoadedTrace>> t = {
      Trace("predicted", "mlp", "1f1b"), Trace("measured", "", "1f1b"), Trace("predicted", "replay:m.json", "gpipe")};
  const Grouping g = GroupTraces(Raw(t));
  ASSERT_EQ(g.groups.size(), 2u);
  EXPECT_EQ(g.groups[0].replay, -1);
  EXPECT_EQ(g.groups[1].Lone(), 2);
  EXPECT_FALSE(g.groups[1].replay_block);
}

}  // namespace
}  // namespace stagecraft::viz
