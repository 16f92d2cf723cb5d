// Tests for viz/src/timeline.cpp: zoom keeps the time under the cursor, pan and fit; the draw
// records of a lane (only visible ops, clipped, sub-pixel runs folded with their count, wide ops
// kept, the alignment shift applied), ruler steps, time labels and idle intervals, all against
// hand-worked pixel positions.
#include "stagecraft/viz/timeline.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

namespace stagecraft::viz {
namespace {

using schedules::Op;
using schedules::OpKind;
using schedules::Stream;
using schedules::TraceOp;

// One rank's compute ops, [start, end) each, loaded through the writer and the reader.
std::shared_ptr<const LoadedTrace> ComputeLane(const std::vector<std::pair<int64_t, int64_t>>& spans) {
  schedules::Trace trace;
  for (size_t i = 0; i < spans.size(); ++i) {
    TraceOp t;
    t.op = Op{OpKind::kF, 0, static_cast<int32_t>(i), 0, 0, -1};
    t.op_index = static_cast<int>(i);
    t.start_ns = spans[i].first;
    t.duration_ns = spans[i].second - spans[i].first;
    trace.ops.push_back(t);
  }
  LoadResult r = LoadTraceText(schedules::TraceToJson(trace), "lane.json");
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.trace->lanes.size(), 1u);
  return r.trace;
}

std::vector<DrawRecord> Prepare(const LoadedTrace& t, const View& view, int64_t shift_ns = 0) {
  std::vector<DrawRecord> out = {DrawRecord{1, 2, 3, 4}};  // cleared by PrepareLane
  PrepareLane(t, t.lanes[0], view, shift_ns, &out);
  return out;
}

void ExpectRecord(const DrawRecord& r, float x0, float x1, int op, int count) {
  EXPECT_NEAR(r.x0_px, x0, 1e-3);
  EXPECT_NEAR(r.x1_px, x1, 1e-3);
  EXPECT_EQ(r.op, op);
  EXPECT_EQ(r.count, count);
}

double TimeAt(const View& v, float x_px) { return v.start_ns + x_px / v.PxPerNs(); }

TEST(Timeline, ZoomKeepsTheTimeUnderTheCursor) {
  View v{1'000'000, 2'000'000, 1000.0f};
  const float xs[] = {250.0f, 0.0f, 999.0f, 333.3f, 617.0f};
  const double factors[] = {3.0, 1.1, 0.5, 7.7, 1 / 1.3};
  for (float x : xs) {
    for (double f : factors) {
      const double before = TimeAt(v, x);
      v.ZoomAround(x, f);
      EXPECT_NEAR(TimeAt(v, x), before, 1.0) << "x " << x << " factor " << f;
    }
  }
  // Hand-worked: span 1 ms zoomed 4x around 25% of the width of [1 ms, 2 ms].
  View w{1'000'000, 2'000'000, 1000.0f};
  w.ZoomAround(250.0f, 4.0);
  EXPECT_EQ(w.start_ns, 1'187'500);
  EXPECT_EQ(w.end_ns, 1'437'500);
}

TEST(Timeline, ZoomInStopsAtAFewNanoseconds) {
  View v{0, 1000, 1000.0f};
  for (int k = 0; k < 20; ++k) v.ZoomAround(500.0f, 10.0);
  EXPECT_EQ(v.end_ns - v.start_ns, 10);
  EXPECT_NEAR(TimeAt(v, 500.0f), 500.0, 1.0);
}

TEST(Timeline, PanMovesTheContentWithTheMouse) {
  View v{0, 2000, 1000.0f};  // 2 ns per px
  v.Pan(100.0f);
  EXPECT_EQ(v.start_ns, -200);
  EXPECT_EQ(v.end_ns, 1800);
  v.Pan(-50.0f);
  EXPECT_EQ(v.start_ns, -100);
  EXPECT_EQ(v.end_ns, 1900);
}

TEST(Timeline, FitAddsTheMargin) {
  View v;
  v.Fit(1000, 2000, 0.1);
  EXPECT_EQ(v.start_ns, 900);
  EXPECT_EQ(v.end_ns, 2100);
  v.Fit(5, 5, 0.0);  // an empty range still makes a usable view
  EXPECT_GT(v.end_ns, v.start_ns);
}

// a left of the view, b across its start, c inside, d across its end, e right of it.
const std::vector<std::pair<int64_t, int64_t>> kFive = {{0, 100}, {150, 450}, {500, 600}, {900, 1200}, {1300, 1400}};

TEST(Timeline, OnlyVisibleOpsClippedToTheView) {
  const auto t = ComputeLane(kFive);
  const std::vector<DrawRecord> r = Prepare(*t, View{200, 1000, 800.0f});  // 1 px per ns
  ASSERT_EQ(r.size(), 3u);
  ExpectRecord(r[0], 0, 250, 1, 1);
  ExpectRecord(r[1], 300, 400, 2, 1);
  ExpectRecord(r[2], 700, 800, 3, 1);
}

TEST(Timeline, OpSpanningTheViewIsClippedToItsWidth) {
  const auto t = ComputeLane({{0, 10'000}});
  const std::vector<DrawRecord> r = Prepare(*t, View{2000, 3000, 640.0f});
  ASSERT_EQ(r.size(), 1u);
  ExpectRecord(r[0], 0, 640, 0, 1);
}

TEST(Timeline, ShiftIsSubtractedFromOpTimes) {
  const auto t = ComputeLane(kFive);
  // After the shift: a [-100,0] b [50,350] c [400,500] d [800,1100] e [1200,1300].
  const std::vector<DrawRecord> r = Prepare(*t, View{200, 1000, 800.0f}, 100);
  ASSERT_EQ(r.size(), 3u);
  ExpectRecord(r[0], 0, 150, 1, 1);
  ExpectRecord(r[1], 200, 300, 2, 1);
  ExpectRecord(r[2], 600, 800, 3, 1);
}

TEST(Timeline, ThousandTinyOpsFoldIntoFewRecords) {
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (int64_t i = 0; i < 1000; ++i) spans.emplace_back(i * 1000, i * 1000 + 1);  // one per pixel
  const auto t = ComputeLane(spans);
  const std::vector<DrawRecord> r = Prepare(*t, View{0, 1'000'000, 1000.0f});
  EXPECT_LE(r.size(), 3u);
  int total = 0;
  for (const DrawRecord& rec : r) {
    total += rec.count;
    if (rec.count > 1) {
      EXPECT_EQ(rec.op, -1);
    }
    EXPECT_GE(rec.x0_px, 0.0f);
    EXPECT_LE(rec.x1_px, 1000.0f);
  }
  EXPECT_EQ(total, 1000);
  // Back to back they are one block from 0 to 1 px.
  std::vector<std::pair<int64_t, int64_t>> packed;
  for (int64_t i = 0; i < 1000; ++i) packed.emplace_back(i, i + 1);
  const std::vector<DrawRecord> one = Prepare(*ComputeLane(packed), View{0, 1'000'000, 1000.0f});
  ASSERT_EQ(one.size(), 1u);
  ExpectRecord(one[0], 0, 1, -1, 1000);
}

TEST(Timeline, WideOpsAreNotMerged) {
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (int64_t i = 0; i < 10; ++i) spans.emplace_back(i * 60, i * 60 + 50);  // 50 px, 10 px gaps
  const std::vector<DrawRecord> r = Prepare(*ComputeLane(spans), View{0, 1000, 1000.0f});
  ASSERT_EQ(r.size(), 10u);
  for (int i = 0; i < 10; ++i) ExpectRecord(r[i], i * 60, i * 60 + 50, i, 1);
}

TEST(Timeline, NarrowRunsSplitByWideOpsAndGaps) {
  // At 1 px per 10 ns: three 1 px ops touching (one block), a 100 px op, one 1 px op right after
  // it (its own record: a wide op does not fold), a 50 px gap, two 0.5 px ops 1 px apart.
  const auto t = ComputeLane({{0, 10}, {10, 20}, {20, 30}, {30, 1030}, {1030, 1040}, {1540, 1545}, {1555, 1560}});
  const std::vector<DrawRecord> r = Prepare(*t, View{0, 10'000, 1000.0f});
  ASSERT_EQ(r.size(), 4u);
  ExpectRecord(r[0], 0, 3, -1, 3);
  ExpectRecord(r[1], 3, 103, 3, 1);
  ExpectRecord(r[2], 103, 104, 4, 1);
  ExpectRecord(r[3], 154, 156, -1, 2);
}

TEST(Timeline, NarrowOpsStartingLeftOfTheViewFoldWithoutTheHiddenOnes) {
  // The 0.6 px op crossing the view's start is clipped to [0, 0.1]; the op after it in start
  // order ends before the view (ops overlap) and is not counted; the next one folds in.
  const auto t = ComputeLane({{0, 5}, {95, 101}, {96, 99}, {105, 106}, {500, 600}});
  const std::vector<DrawRecord> r = Prepare(*t, View{100, 10'100, 1000.0f});  // 10 ns per px
  ASSERT_EQ(r.size(), 2u);
  ExpectRecord(r[0], 0, 0.6f, -1, 2);
  ExpectRecord(r[1], 40, 50, 4, 1);
}

// Against a brute-force pass over every op of overlapping lanes (send/recv streams overlap),
// for many views and shifts: the counts add up to the ops the view shows, records run left to
// right inside [0, width], a single-op record is exactly that op clipped, and every shown op
// lies inside the record that counts it.
TEST(Timeline, AgreesWithABruteForcePassOnOverlappingOps) {
  uint64_t seed = 12345;
  auto next = [&seed](int64_t bound) {  // a fixed linear congruential sequence
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int64_t>((seed >> 33) % static_cast<uint64_t>(bound));
  };
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (int i = 0; i < 3000; ++i) {
    const int64_t start = next(1'000'000);
    const int64_t length = next(10) == 0 ? next(100'000) : next(300);  // a few long ones
    spans.emplace_back(start, start + length);
  }
  const auto t = ComputeLane(spans);
  const Lane& lane = t->lanes[0];
  int folded = 0, records = 0;  // the cases must include folded blocks and single ops
  for (int round = 0; round < 200; ++round) {
    const int64_t span = 1 + next(round % 2 ? 20'000 : 1'200'000);
    const View view{next(1'100'000) - 50'000, 0, 200.0f + next(1800)};
    View v = view;
    v.end_ns = v.start_ns + span;
    const int64_t shift = next(3) == 0 ? next(20'000) - 10'000 : 0;
    const std::vector<DrawRecord> r = Prepare(*t, v, shift);
    std::vector<int> shown;
    for (int op : lane.ops) {
      const int64_t s = t->trace.ops[op].start_ns - shift, e = s + t->trace.ops[op].duration_ns;
      if (s == e ? v.start_ns <= s && s <= v.end_ns : s < v.end_ns && e > v.start_ns) shown.push_back(op);
    }
    int total = 0;
    size_t k = 0;  // shown ops in lane order are counted by the records in order
    for (size_t j = 0; j < r.size(); ++j) {
      ASSERT_LE(0.0f, r[j].x0_px);
      ASSERT_LE(r[j].x0_px, r[j].x1_px);
      ASSERT_LE(r[j].x1_px, v.width_px);
      if (j > 0) {
        ASSERT_LE(r[j - 1].x0_px, r[j].x0_px);
      }
      folded += r[j].count > 1 ? 1 : 0;
      ASSERT_EQ(r[j].op == -1, r[j].count > 1);
      for (int c = 0; c < r[j].count; ++c, ++k) {
        ASSERT_LT(k, shown.size()) << "round " << round;
        const TraceOp& op = t->trace.ops[shown[k]];
        const double x0 = std::clamp((op.start_ns - shift - v.start_ns) * v.PxPerNs(), 0.0, double{v.width_px});
        const double x1 =
            std::clamp((op.start_ns + op.duration_ns - shift - v.start_ns) * v.PxPerNs(), 0.0, double{v.width_px});
        if (r[j].count == 1) {
          ASSERT_EQ(r[j].op, shown[k]) << "round " << round;
        }
        ASSERT_GE(x0, r[j].x0_px - 1e-3) << "round " << round;
        ASSERT_LE(x1, r[j].x1_px + 1e-3) << "round " << round;
      }
      total += r[j].count;
    }
    ASSERT_EQ(total, static_cast<int>(shown.size())) << "round " << round;
    records += static_cast<int>(r.size());
  }
  EXPECT_GT(folded, 100);
  EXPECT_GT(records - folded, 1000);
}

TEST(Timeline, EmptyViewRangeHasNoRecords) {
  const auto t = ComputeLane(kFive);
  EXPECT_TRUE(Prepare(*t, View{2000, 3000, 800.0f}).empty());
  EXPECT_TRUE(Prepare(*t, View{-500, -100, 800.0f}).empty());
}

TEST(Timeline, CollapsedViewHasNoRecordsAndIgnoresZoomAndPan) {
  const auto t = ComputeLane(kFive);
  EXPECT_TRUE(Prepare(*t, View{0, 1000, 0.0f}).empty());
  EXPECT_TRUE(Prepare(*t, View{500, 500, 800.0f}).empty());
  View v{0, 1000, 0.0f};
  v.ZoomAround(0.0f, 2.0);
  v.Pan(10.0f);
  EXPECT_EQ(v.start_ns, 0);
  EXPECT_EQ(v.end_ns, 1000);
}

TEST(Timeline, RulerStepsAreOneTwoFiveTimesAPowerOfTen) {
  EXPECT_EQ(RulerStepNs(View{0, 1'000'000, 1000.0f}, 45.0f), 50'000);  // 1000 ns per px
  EXPECT_EQ(RulerStepNs(View{0, 1'000'000, 1000.0f}, 60.0f), 100'000);
  EXPECT_EQ(RulerStepNs(View{0, 1000, 1000.0f}, 15.0f), 20);
  EXPECT_EQ(RulerStepNs(View{0, 3'000'000'000, 1500.0f}, 90.0f), 200'000'000);
  EXPECT_EQ(RulerStepNs(View{0, 10, 1000.0f}, 80.0f), 1);
}

TEST(Timeline, FormatTimePicksTheUnit) {
  EXPECT_EQ(FormatTime(1'500'000), "1.5 ms");
  EXPECT_EQ(FormatTime(250'000), "250 us");
  EXPECT_EQ(FormatTime(12), "12 ns");
  EXPECT_EQ(FormatTime(0), "0 ns");
  EXPECT_EQ(FormatTime(2'000'000'000), "2.0 s");
  EXPECT_EQ(FormatTime(1000), "1.0 us");
  EXPECT_EQ(FormatTime(1250), "1.25 us");
  EXPECT_EQ(FormatTime(12'500), "12.5 us");
  EXPECT_EQ(FormatTime(20'000), "20 us");
  EXPECT_EQ(FormatTime(1'234'567), "1.235 ms");
  EXPECT_EQ(FormatTime(999'999'600), "1.0 s");
  EXPECT_EQ(FormatTime(3'600'000'000'000), "3600 s");
  EXPECT_EQ(FormatTime(-1'500'000), "-1.5 ms");
}

TEST(Timeline, IdleIntervalsBetweenOps) {
  const auto t = ComputeLane({{100, 200}, {250, 300}, {300, 400}, {450, 500}});
  using Gaps = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(IdleIntervals(*t, t->lanes[0], 0, 600), (Gaps{{0, 100}, {200, 250}, {400, 450}, {500, 600}}));
  EXPECT_EQ(IdleIntervals(*t, t->lanes[0], 150, 470), (Gaps{{200, 250}, {400, 450}}));
  EXPECT_EQ(IdleIntervals(*t, t->lanes[0], 120, 180), Gaps{});
  EXPECT_EQ(IdleIntervals(*t, t->lanes[0], 600, 700), (Gaps{{600, 700}}));
}

TEST(Timeline, IdleIntervalsWithOverlappingOps) {
  const auto t = ComputeLane({{100, 300}, {150, 200}, {350, 400}});
  using Gaps = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(IdleIntervals(*t, t->lanes[0], 0, 500), (Gaps{{0, 100}, {300, 350}, {400, 500}}));
  EXPECT_EQ(IdleIntervals(*t, t->lanes[0], 250, 500), (Gaps{{300, 350}, {400, 500}}));
}

}  // namespace
}  // namespace stagecraft::viz
