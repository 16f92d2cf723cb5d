// schedules/zb_auto.h: the Zero Bubble heuristic against its authors' own outputs on the paper's
// profiled costs (data/zero_bubble_auto.csv, whose ZB-2p values match the three the paper
// publishes), and the orders it emits checked on their own terms: every pass once, F before B
// before W per microbatch, the memory limit never passed, the span its end times imply.
#include "stagecraft/schedules/zb_auto.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../data_csv.h"

namespace stagecraft::schedules {
namespace {

struct Row {
  std::string model;
  int p = 0, m = 0;
  double f = 0, b = 0, w = 0, comm = 0, span_1p = 0, span_2p = 0;
};

std::vector<Row> ReadRows() {
  std::vector<Row> rows;
  for (const auto& c : testing_data::ReadDataCsv("zero_bubble_auto.csv")) {
    rows.push_back({c.at("model"), std::stoi(c.at("p")), std::stoi(c.at("m")), std::stod(c.at("f_us")),
                    std::stod(c.at("b_us")), std::stod(c.at("w_us")), std::stod(c.at("comm_us")),
                    std::stod(c.at("zb_1p_span_us")), std::stod(c.at("zb_2p_span_us"))});
  }
  return rows;
}

ZbAutoCosts Costs(const Row& r, double pending) {
  ZbAutoCosts c;
  c.f.assign(r.p, r.f);
  c.b.assign(r.p, r.b);
  c.w.assign(r.p, r.w);
  c.comm = r.comm;
  c.mem_f.assign(r.p, 1.0);
  c.mem_b.assign(r.p, -0.5);
  c.mem_w.assign(r.p, -0.5);
  c.microbatches = r.m;
  return ZbAutoLimit(c, pending);
}

// The order on its own terms.
void CheckOrder(const ZbAutoCosts& c, const ZbAutoOrder& o) {
  const int p = static_cast<int>(c.f.size());
  ASSERT_EQ(static_cast<int>(o.order.size()), p);
  double span = 0;
  for (int j = 0; j < p; ++j) {
    std::vector<int> next(3, 0);  // F, I, W: the next microbatch of each (in order)
    double mem = 0;
    ASSERT_EQ(static_cast<int>(o.order[j].size()), 3 * c.microbatches);
    for (const auto& [kind, mb] : o.order[j]) {
      const int k = kind == OpKind::kF ? 0 : kind == OpKind::kI ? 1 : 2;
      ASSERT_EQ(mb, next[k]) << "stage " << j;
      ++next[k];
      if (k > 0) {
        ASSERT_LT(mb, next[k - 1]) << "stage " << j << ": a pass before the one it needs";
      }
      mem += k == 0 ? c.mem_f[j] : k == 1 ? c.mem_b[j] : c.mem_w[j];
      ASSERT_LE(mem, c.max_mem[j] + 1e-9) << "stage " << j << " passes its memory limit";
    }
    span = std::max(span, o.end[j].back() - (o.end[j].front() - c.f[j]));
  }
  EXPECT_DOUBLE_EQ(span, o.span);
}

TEST(ZbAuto, ReproducesTheAuthorsHeuristicOnThePapersCosts) {
  const std::vector<Row> rows = ReadRows();
  ASSERT_EQ(rows.size(), 12u);
  for (const Row& r : rows) {
    for (const auto& [pending, span] : {std::pair{1.0, r.span_1p}, std::pair{2.0, r.span_2p}}) {
      const ZbAutoCosts c = Costs(r, pending * r.p);
      std::string why;
      const std::optional<ZbAutoOrder> o = ZbAutoSchedule(c, &why);
      ASSERT_TRUE(o.has_value()) << r.model << " m=" << r.m << ": " << why;
      EXPECT_NEAR(o->span, span, 1e-3) << r.model << " m=" << r.m << " at " << pending << "p";
      CheckOrder(c, *o);
    }
  }
}

// The paper's published ZB-2p bubble rates (Table 5), from the spans.
TEST(ZbAuto, PublishedZb2pBubbleRates) {
  for (const Row& r : ReadRows()) {
    const double published = r.model == "1.5B" && r.m == 24 ? 0.0433 : r.model == "6.2B" && r.m == 64 ? 0.0010
                             : r.model == "28.3B" && r.m == 96 ? 0.0038 : -1;
    if (published < 0) continue;
    const std::optional<ZbAutoOrder> o = ZbAutoSchedule(Costs(r, 2.0 * r.p), nullptr);
    ASSERT_TRUE(o.has_value());
    EXPECT_NEAR((o->span - r.m * (r.f + r.b + r.w)) / o->span, published, 5e-5) << r.model;
  }
}

// A limit below one forward's activations cannot be met: nullopt, and why.
TEST(ZbAuto, AnImpossibleLimitSaysWhy) {
  ZbAutoCosts c;
  c.f = c.b = c.w = {1, 1};
  c.mem_f = {1, 1};
  c.mem_b = c.mem_w = {-0.5, -0.5};
  c.max_mem = {0.5, 0.5};
  c.microbatches = 4;
  std::string why;
  EXPECT_FALSE(ZbAutoSchedule(c, &why).has_value());
  EXPECT_NE(why.find("memory limit"), std::string::npos) << why;
}

// One stage, no limit to speak of: F, then B and W of each microbatch in turn; span = m(F+B+W).
TEST(ZbAuto, OneStageRunsBackToBack) {
  ZbAutoCosts c;
  c.f = {2};
  c.b = {3};
  c.w = {1};
  c.mem_f = {1};
  c.mem_b = c.mem_w = {-0.5};
  c.max_mem = {100};
  c.microbatches = 3;
  const std::optional<ZbAutoOrder> o = ZbAutoSchedule(c, nullptr);
  ASSERT_TRUE(o.has_value());
  EXPECT_DOUBLE_EQ(o->span, 18);
  CheckOrder(c, *o);
}

}  // namespace
}  // namespace stagecraft::schedules
