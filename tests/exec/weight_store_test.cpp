// The runtime's weight store (exec/src/weight_store.cpp) on the cpu device, walked over real
// schedules with no math: versions alive against DESIGN.md §2's closed forms, freeing after the
// last reader, zeroed gradient buffers and their reuse, and a STEP's update worked by hand.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "../schedules/generator_cases.h"
#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/weight_store.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"

namespace stagecraft::exec {
namespace {

using schedules::Op;
using schedules::OpKind;

constexpr int kHidden = 3;

schedules::Schedule Make(const std::string& name, int ranks, int microbatches, int steps) {
  return schedules::Lower(schedules::Generate(name, schedules::test_cases::Params(ranks, microbatches, steps)));
}

TrainingConfig Config(float lr = 0.5f, float loss_scale = 1.0f) {
  TrainingConfig c;
  c.model = MlpModel{.layers = 1, .hidden = kHidden, .seed = 5};
  c.lr = lr;
  c.momentum = 0.0f;
  c.loss_scale = loss_scale;
  return c;
}

// The store of one rank, its stage built as a one-layer MLP.
struct Store {
  Store(const schedules::Schedule& s, int rank, const TrainingConfig& c = Config())
      : schedule(s), config(c), model(*device, StageShape{.hidden = kHidden}, c.model), store(s, rank, *device, config) {
    store.AddStage(rank, model);
  }
  std::vector<float> Download(const float* data) {
    std::vector<float> host(static_cast<size_t>(model.ParamFloats()));
    device->memory().Download(host.data(), data, model.ParamFloats());
    return host;
  }
  std::unique_ptr<Device> device = MakeCpuDevice();
  const schedules::Schedule& schedule;
  TrainingConfig config;
  MlpStage model;
  WeightStore store;
};

// Walks `rank`'s ops through the store as the runtime does, with no math: F and I read their
// version, B and W take their update's gradients, STEP steps; then after(i, op, gradients of
// op or null).
template <typename After>
void Walk(Store& s, int rank, After after) {
  const std::vector<Op>& ops = s.schedule.ops[rank];
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    const Op& op = ops[i];
    const float* grads = nullptr;
    if (op.kind == OpKind::kStep) {
      s.store.Step(i, op);
    } else if (schedules::IsCompute(op.kind)) {
      EXPECT_NE(s.store.Read(op), nullptr);
      if (op.kind == OpKind::kB || op.kind == OpKind::kW) {
        const GradTarget g = s.store.Gradients(op);
        EXPECT_TRUE(g.accumulate);
        grads = g.data;
      }
      s.store.Release(i, op);
    }
    after(i, op, grads);
  }
}

TEST(WeightStore, FlushKeepsOneVersionUpdatedInPlaceAndReusesItsGradients) {
  const schedules::Schedule s = Make("1f1b", 2, 4, 3);
  for (int rank = 0; rank < 2; ++rank) {
    Store st(s, rank);
    const float* weights = st.store.Newest(rank);
    EXPECT_EQ(st.store.zeroed_gradients(rank), 1);
    const float* grads = nullptr;
    int steps = 0;
    Walk(st, rank, [&](int, const Op& op, const float* g) {
      EXPECT_EQ(st.store.versions(rank), 1);
      if (op.kind == OpKind::kB) {
        EXPECT_EQ(st.store.zeroed_gradients(rank), 0);  // taken by the open update
        if (grads == nullptr) grads = g;
        EXPECT_EQ(g, grads) << "one gradient buffer, reused by every update";
      }
      if (op.kind != OpKind::kStep) return;
      ++steps;
      EXPECT_EQ(st.store.newest(rank), steps);
      EXPECT_EQ(st.store.Newest(rank), weights) << "updated in place";
      EXPECT_EQ(st.store.zeroed_gradients(rank), 1);
    });
    EXPECT_EQ(steps, 3);
    EXPECT_EQ(st.store.peak_versions(), 1);
  }
}

// PipeDream (Harlap et al., SOSP'19) stashes a version per microbatch in flight: stage s of n
// keeps n − s (DESIGN.md §2); each is freed after its last reader, so the newest alone is left.
TEST(WeightStore, PipeDreamStashesNMinusSVersionsEachFreedAfterItsLastReader) {
  const int n = 4;
  const schedules::Schedule s = Make("pipedream", n, 8, 2);
  for (int rank = 0; rank < n; ++rank) {
    Store st(s, rank);
    Walk(st, rank, [&](int, const Op&, const float*) { EXPECT_LE(st.store.versions(rank), n - rank); });
    EXPECT_EQ(st.store.peak_versions(), n - rank) << "stage " << rank;
    EXPECT_EQ(st.store.versions(rank), 1) << "every stashed version was freed after its last reader";
    EXPECT_EQ(st.store.newest(rank), 16);  // one update per microbatch
  }
}

// PipeDream-2BW (Narayanan et al., ICML'21 §3.1): at most two versions alive.
TEST(WeightStore, TwoBwKeepsTwoVersions) {
  const schedules::Schedule s = Make("2bw", 4, 8, 3);
  for (int rank = 0; rank < 4; ++rank) {
    Store st(s, rank);
    Walk(st, rank, [&](int, const Op&, const float*) { EXPECT_LE(st.store.versions(rank), 2); });
    EXPECT_EQ(st.store.peak_versions(), 2) << "stage " << rank;
    EXPECT_EQ(st.store.newest(rank), 3);
  }
}

// SGD without momentum, by hand: w1 = w0 − lr · (Σ grads / backwards) / loss_scale; the update
// leaves its gradient buffer zeroed.
TEST(WeightStore, AStepAppliesTheMeanGradientWithTheLossScaleTakenOut) {
  const schedules::Schedule s = Make("gpipe", 1, 4, 1);
  Store st(s, 0, Config(0.5f, 4.0f));
  const std::vector<float> w0 = st.Download(st.store.Newest(0));
  float* grads = nullptr;
  int backward = 0;
  const std::vector<Op>& ops = s.ops[0];
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    const Op& op = ops[i];
    if (op.kind == OpKind::kB) {
      grads = st.store.Gradients(op).data;
      // Microbatch k adds k + 1 to every gradient: 1 + 2 + 3 + 4 = 10 over 4 backwards.
      std::vector<float> sum = st.Download(grads);
      for (float& g : sum) g += static_cast<float>(backward + 1);
      ++backward;
      st.device->memory().Upload(grads, sum.data(), st.model.ParamFloats());
    } else if (op.kind == OpKind::kStep) {
      st.store.Step(i, op);
    }
  }
  ASSERT_EQ(backward, 4);
  const std::vector<float> w1 = st.Download(st.store.Newest(0));
  for (size_t j = 0; j < w0.size(); ++j) EXPECT_FLOAT_EQ(w1[j], w0[j] - 0.5f * (10.0f / 4.0f) / 4.0f) << j;
  for (const float g : st.Download(grads)) EXPECT_EQ(g, 0.0f);
  EXPECT_EQ(st.store.zeroed_gradients(0), 1);
}

TEST(WeightStore, AnUpdateThatStartsWhileAnotherIsOpenGetsAZeroedBufferOfItsOwn) {
  const schedules::Schedule s = Make("gpipe", 1, 2, 2);
  Store st(s, 0);
  const Op b0{.kind = OpKind::kB, .stage = 0, .microbatch = 0, .step = 0, .version = 0};
  Op b1 = b0;
  b1.step = 1;
  float* first = st.store.Gradients(b0).data;
  st.device->memory().Fill(first, 7.0f, st.model.ParamFloats());
  EXPECT_EQ(st.store.Gradients(b0).data, first) << "the same update, the same buffer";
  float* second = st.store.Gradients(b1).data;
  EXPECT_NE(second, first);
  for (const float g : st.Download(second)) EXPECT_EQ(g, 0.0f);
}

TEST(WeightStore, OnlyTheLastReaderOfAnOldVersionFreesIt) {
  const schedules::Schedule s = Make("pipedream", 2, 4, 1);
  Store st(s, 0);
  const std::vector<Op>& ops = s.ops[0];
  // Run stage 0 up to its first STEP: version 0 stays while a later op still reads it.
  int i = 0;
  for (; ops[i].kind != OpKind::kStep; ++i) {
    if (ops[i].kind == OpKind::kB) st.store.Gradients(ops[i]);
  }
  st.store.Step(i, ops[i]);
  ASSERT_EQ(st.store.newest(0), 1);
  EXPECT_EQ(st.store.versions(0), 2) << "a microbatch in flight still reads version 0";
  int last_reader_of_0 = -1;
  for (int j = i + 1; j < static_cast<int>(ops.size()); ++j) {
    if (schedules::IsCompute(ops[j].kind) && ops[j].version == 0) last_reader_of_0 = j;
  }
  ASSERT_GT(last_reader_of_0, i);
  st.store.Release(i, ops[last_reader_of_0]);
  EXPECT_EQ(st.store.versions(0), 2) << "not its last reader";
  st.store.Release(last_reader_of_0, ops[last_reader_of_0]);
  EXPECT_EQ(st.store.versions(0), 1);
}

// PipeMare's correction worked by hand (rank 0 of pipemare on 2 ranks, 3 microbatches): plain SGD
// at rate 0.5 with every gradient 1 moves each weight by −0.5 per update, and γ = 0.5 makes the
// velocity δ1 = 0.5·(−0.5) = −0.25 after the first update and δ2 = 0.5·(−0.25) + 0.5·(−0.5) =
// −0.375 after the second. B0 spans no update and reads w0; B1 (F1 read w0, B1 finds w1) reads
// w1 − δ1 = w0 − 0.25; B2 (F2 read w1) reads w2 − δ2 = w0 − 1 + 0.375. After each backward the
// weights are back where the updates put them.
TEST(WeightStore, PipeMareCorrectionExtrapolatesTheBackwardsWeightsByTheVelocity) {
  const schedules::Schedule s = Make("pipemare", 2, 3, 1);
  TrainingConfig c = Config(0.5f);
  c.pipemare = sim::PipeMareSpec{0, true, 0.5};
  Store st(s, 0, c);
  const std::vector<float> w0 = st.Download(st.store.Newest(0));
  const std::vector<Op>& ops = s.ops[0];
  std::vector<double> read_shift;  // per B, what it read minus w0 (every weight alike)
  int steps = 0;
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    const Op& op = ops[i];
    if (op.kind == OpKind::kStep) {
      st.store.Step(i, op);
      ++steps;
      const std::vector<float> w = st.Download(st.store.Newest(0));
      for (size_t j = 0; j < w.size(); ++j) ASSERT_NEAR(w[j], w0[j] - 0.5 * steps, 1e-6) << "after STEP " << steps;
      continue;
    }
    if (op.kind != OpKind::kB) continue;
    st.store.Correct(i, op, true);
    const std::vector<float> w = st.Download(st.store.Read(op));
    read_shift.push_back(static_cast<double>(w[0]) - w0[0]);
    for (size_t j = 0; j < w.size(); ++j) EXPECT_NEAR(w[j] - w0[j], read_shift.back(), 1e-6);
    st.store.Correct(i, op, false);
    const GradTarget g = st.store.Gradients(op);
    std::vector<float> ones(static_cast<size_t>(st.model.ParamFloats()), 1.0f);
    st.device->memory().Upload(g.data, ones.data(), st.model.ParamFloats());
    const std::vector<float> back = st.Download(st.store.Read(op));
    for (size_t j = 0; j < back.size(); ++j) EXPECT_NEAR(back[j], w0[j] - 0.5 * steps, 1e-6) << "restored";
  }
  ASSERT_EQ(read_shift.size(), 3u);
  EXPECT_NEAR(read_shift[0], 0.0, 1e-6);
  EXPECT_NEAR(read_shift[1], -0.25, 1e-6);
  EXPECT_NEAR(read_shift[2], -0.625, 1e-6);
  EXPECT_EQ(st.store.peak_versions(), 1) << "no stash: one version";
}

}  // namespace
}  // namespace stagecraft::exec
