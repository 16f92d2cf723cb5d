// Data parallelism's host logic without MPI (replica_group.h, grad_reducer.h, poll.h, setup.cpp's
// slicing): the world layout, each replica's slice of a microbatch built for D·b samples
// (against model.h's and gpt.h's data of D·b directly), the polling wait's deadline and
// backoff, and the runtime's REDUCE_GRAD on one rank with a fake group of two replicas. Several
// processes run in runtime_mpi.cpp against the sequential reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fake_transport.h"
#include "queued_device.h"
#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/gpt.h"
#include "stagecraft/exec/grad_reducer.h"
#include "stagecraft/exec/model.h"
#include "stagecraft/exec/op_clock.h"
#include "stagecraft/exec/poll.h"
#include "stagecraft/exec/replica_group.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"

namespace stagecraft::exec {
namespace {

TEST(WorldLayout, ReplicasAreOutermost) {
  const WorldLayout layout{3, 2};
  EXPECT_EQ(layout.world(), 6);
  const int replica[] = {0, 0, 0, 1, 1, 1}, rank[] = {0, 1, 2, 0, 1, 2};
  for (int w = 0; w < 6; ++w) {
    EXPECT_EQ(layout.ReplicaOf(w), replica[w]) << w;
    EXPECT_EQ(layout.PipelineRankOf(w), rank[w]) << w;
  }
}

TEST(ReplicaSlice, TakesTheReplicasRowsInOrder) {
  const std::vector<float> whole = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};  // 3 replicas x 4 floats
  std::vector<float> out(4);
  ReplicaSlice(whole.data(), 3, 1, 4, out.data());
  EXPECT_EQ(out, (std::vector<float>{4, 5, 6, 7}));
  ReplicaSlice(whole.data(), 3, 2, 4, out.data());
  EXPECT_EQ(out, (std::vector<float>{8, 9, 10, 11}));
}

// Replica r's dataset holds rows [r·b, (r+1)·b) of every microbatch as model.h builds it for
// D·b rows: inputs and the teacher's targets (MSE and cross-entropy).
TEST(ReplicaDataset, MlpReplicaHoldsItsRowsOfTheWholeMicrobatch) {
  for (const auto loss : {kernels::LossKind::kMse, kernels::LossKind::kCrossEntropy}) {
    TrainingConfig config;
    config.model = MlpModel{.layers = 2, .hidden = 5, .loss = loss, .seed = 3};
    config.microbatch_size = 2;  // b
    config.data_parallel = 3;    // D
    const int whole_rows = 6, h = 5, b = 2;
    const int64_t microbatches = 4, target_per = TargetFloats(config.model, b);
    auto device = MakeCpuDevice();
    for (int r = 0; r < 3; ++r) {
      const Dataset d = MakeDataset(*device, config, microbatches, true, true, {}, r);
      ASSERT_EQ(d.microbatches, microbatches);
      ASSERT_EQ(d.inputs.size(), microbatches * b * h);
      ASSERT_EQ(d.targets.size(), microbatches * target_per);
      for (int64_t g = 0; g < microbatches; ++g) {
        std::vector<float> x(whole_rows * h), y(static_cast<size_t>(TargetFloats(config.model, whole_rows)));
        MicrobatchInput(config.model, whole_rows, g, x.data());
        MicrobatchTarget(config.model, whole_rows, g, y.data());
        const float* in = d.inputs.data() + g * b * h;
        const float* tg = d.targets.data() + g * target_per;
        for (int i = 0; i < b * h; ++i) ASSERT_EQ(in[i], x[r * b * h + i]) << "replica " << r << " microbatch " << g;
        for (int64_t i = 0; i < target_per; ++i) ASSERT_EQ(tg[i], y[r * target_per + i]) << "replica " << r;
      }
    }
  }
}

TEST(ReplicaDataset, GptReplicaHoldsItsSequencesOfTheWholeMicrobatch) {
  TrainingConfig config;
  config.gpt = GptModel{.layers = 1, .hidden = 8, .heads = 2, .seq = 4, .vocab = 16, .seed = 5};
  config.microbatch_size = 1;
  config.data_parallel = 2;
  auto device = MakeCpuDevice();
  const int t = 4;
  for (int r = 0; r < 2; ++r) {
    const Dataset d = MakeDataset(*device, config, 3, true, true, {}, r);
    for (int64_t g = 0; g < 3; ++g) {
      std::vector<float> x(2 * t), y(2 * t);
      GptMicrobatch(*config.gpt, 2, g, x.data(), y.data());
      for (int i = 0; i < t; ++i) {
        ASSERT_EQ(d.inputs.data()[g * t + i], x[r * t + i]) << "replica " << r << " microbatch " << g;
        ASSERT_EQ(d.targets.data()[g * t + i], y[r * t + i]) << "replica " << r << " microbatch " << g;
      }
    }
  }
}

// A fake clock: each reading advances it by 1 µs; sleeps advance it by their length.
struct FakeClock {
  int64_t now = 0;
  std::vector<int64_t> sleeps;
};

TEST(PollUntil, ReturnsTrueOnceDoneAndFalseAtTheDeadline) {
  FakeClock clock;
  const auto now = [&] { return clock.now += 1000; };
  const auto sleep = [&](int64_t ns) {
    clock.sleeps.push_back(ns);
    clock.now += ns;
  };
  const PollPolicy policy{.deadline_ns = 100'000, .spin_ns = 5'000, .min_sleep_ns = 2'000, .max_sleep_ns = 8'000};
  int polls = 0;
  EXPECT_TRUE(PollUntil([&] { return ++polls == 3; }, policy, now, sleep));
  EXPECT_EQ(polls, 3);
  EXPECT_TRUE(clock.sleeps.empty());  // done within the spin
  clock = {};
  EXPECT_FALSE(PollUntil([] { return false; }, policy, now, sleep));
  EXPECT_GT(clock.now, 100'000);
  ASSERT_GE(clock.sleeps.size(), 4u);
  EXPECT_EQ(clock.sleeps[0], 2'000);  // doubling from the least sleep ...
  EXPECT_EQ(clock.sleeps[1], 4'000);
  EXPECT_EQ(clock.sleeps[2], 8'000);
  EXPECT_EQ(clock.sleeps[3], 8'000);  // ... up to the most
}

// A group of two replicas on one process: the other replica's gradients equal this one's, so
// the sum doubles them; an all-reduce completes when the test says so or when waited for, unless
// it is told to time out.
class FakeReplicaGroup final : public ReplicaGroup {
 public:
  int replica() const override { return 0; }
  int size() const override { return 2; }
  std::string Name() const override { return "fake"; }
  using ReplicaGroup::PostSum;
  Request PostSum(void* raw, int64_t count, ElementType type) override {
    EXPECT_EQ(type, ElementType::kF32);  // a run sums its gradients in fp32
    auto* data = static_cast<float*>(raw);
    for (int64_t i = 0; i < count; ++i) data[i] *= 2;
    done.push_back(complete_at_once);
    return static_cast<Request>(done.size() - 1);
  }
  bool Test(Request request) override { return done.at(request); }
  void Wait(Request request) override {
    ++waits;
    if (times_out) throw TimeoutError("no all-reduce within the deadline");
    done.at(request) = true;
  }
  Transport& host() override { return host_; }
  int64_t CompletedNs() const override { return completed_ns; }
  void Prepare(const std::vector<int64_t>& sum_floats) override { prepared.push_back(sum_floats); }

  std::vector<std::vector<int64_t>> prepared;  // each Prepare's sizes
  std::vector<bool> done;
  int64_t completed_ns = -1;  // CompletedNs: a device's time of the last completion, or none
  bool complete_at_once = false;
  bool times_out = false;
  int waits = 0;

 private:
  testing::FakeTransport host_;
};

constexpr int kMicrobatches = 4, kSteps = 2;

schedules::Schedule OneRankSchedule(const std::string& name, int data_parallel) {
  schedules::GeneratorParams p;
  p.microbatches = kMicrobatches;
  p.steps = kSteps;
  p.data_parallel = data_parallel;
  return schedules::Lower(schedules::Generate(name, p));
}

TrainingConfig SmallMlp(int data_parallel) {
  TrainingConfig c;
  c.model = MlpModel{.layers = 2, .hidden = 6, .seed = 9};
  c.microbatch_size = 2;
  c.lr = 0.05f;
  c.layers_per_stage = {2};
  c.data_parallel = data_parallel;
  return c;
}

// Summed over two replicas that hold the same gradients and divided by 2, the update is the one
// replica's, bit for bit: the STEP divides by D (the weights and the losses of a run without
// replicas on the same data, for a flush and a per-microbatch update). Every REDUCE_GRAD is
// timed from its post to its completion.
TEST(ReduceGrad, TheStepDividesTheReplicasSumByTheirCount) {
  for (const std::string name : {"1f1b", "pipedream"}) {
    auto device = MakeCpuDevice();
    const Dataset data = MakeDataset(*device, SmallMlp(2), int64_t{kMicrobatches} * kSteps, true, true);
    RunHooks hooks;
    hooks.keep_final_params = true;
    testing::FakeTransport t1, t2;
    const RankRun alone = RunRank(OneRankSchedule(name, 1), SmallMlp(1), data, *device, t1, hooks);
    FakeReplicaGroup group;
    const schedules::Schedule s = OneRankSchedule(name, 2);
    const RankRun replicated = RunRank(s, SmallMlp(2), data, *device, t2, hooks, &group);
    EXPECT_EQ(replicated.final_params, alone.final_params) << name;
    EXPECT_EQ(replicated.record.losses, alone.record.losses) << name;
    int reduces = 0;
    for (size_t i = 0; i < s.ops[0].size(); ++i) {
      if (s.ops[0][i].kind != schedules::OpKind::kReduceGrad) continue;
      ++reduces;
      const schedules::OpTiming& t = replicated.record.ops[i];
      EXPECT_GE(t.start_ns, 0) << name << " op " << i;
      EXPECT_GE(t.end_ns, t.start_ns) << name << " op " << i;
    }
    EXPECT_EQ(reduces, static_cast<int>(group.done.size())) << name;
    // Prepared before the run at the one stage's size: 2 layers of 6 x 6 weights and 6 biases.
    EXPECT_EQ(group.prepared, (std::vector<std::vector<int64_t>>{{2 * (6 * 6 + 6)}})) << name;
    EXPECT_GT(reduces, 0) << name;
    EXPECT_EQ(group.waits, reduces) << name;  // the fake completes only when waited for
  }
}

// Each size once, smallest first, whatever order the REDUCE_GRADs come in; other ops add none.
TEST(SumSizes, EachReduceGradsSizeOnceSmallestFirst) {
  using schedules::Op;
  using schedules::OpKind;
  const std::vector<Op> ops = {Op{.kind = OpKind::kReduceGrad, .stage = 2}, Op{.kind = OpKind::kB, .stage = 1},
                               Op{.kind = OpKind::kReduceGrad, .stage = 0}, Op{.kind = OpKind::kReduceGrad, .stage = 2},
                               Op{.kind = OpKind::kReduceGrad, .stage = 4}};
  const auto floats = [](int stage) { return stage == 2 ? int64_t{900} : int64_t{70}; };
  EXPECT_EQ(SumSizes(ops, floats), (std::vector<int64_t>{70, 900}));
  EXPECT_TRUE(SumSizes({Op{.kind = OpKind::kF}}, floats).empty());
}

// One rank of `name` on the cpu device, one of two replicas whose all-reduces go to `group`.
void RunReplica(const std::string& name, FakeReplicaGroup* group) {
  auto device = MakeCpuDevice();
  const Dataset data = MakeDataset(*device, SmallMlp(2), int64_t{kMicrobatches} * kSteps, true, true);
  testing::FakeTransport transport;
  RunRank(OneRankSchedule(name, 2), SmallMlp(2), data, *device, transport, {}, group);
}

// A replica that never completes the all-reduce: the STEP's wait ends on the deadline with one
// message naming the REDUCE_GRAD op.
TEST(ReduceGrad, AWaitPastTheDeadlineNamesTheOp) {
  FakeReplicaGroup group;
  group.times_out = true;
  try {
    RunReplica("1f1b", &group);
    FAIL() << "returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("0REDUCE_GRAD1 (step 0) timed out: no all-reduce"), std::string::npos)
        << e.what();
  }
}

// An all-reduce seen complete by a poll after an op is not waited for again.
TEST(ReduceGrad, APolledCompletionIsNotWaitedFor) {
  FakeReplicaGroup group;
  group.complete_at_once = true;
  RunReplica("gpipe", &group);
  EXPECT_EQ(group.waits, 0);
  EXPECT_EQ(group.done.size(), static_cast<size_t>(kSteps));
}

// On a device that queues its work, a REDUCE_GRAD starts when the device has run the backwards
// queued before its post, and ends when the group timed the sum's completion on the device, not
// when the host got round to seeing it.
TEST(ReduceGrad, OnAQueuedDeviceItIsTimedWhereItRan) {
  const schedules::Schedule s = OneRankSchedule("1f1b", 2);
  const std::vector<schedules::Op>& ops = s.ops[0];
  const auto at = [&](schedules::OpKind kind) {
    return static_cast<int>(std::find_if(ops.begin(), ops.end(), [&](const schedules::Op& o) { return o.kind == kind; }) -
                            ops.begin());
  };
  const int reduce = at(schedules::OpKind::kReduceGrad), step = at(schedules::OpKind::kStep);
  ASSERT_LT(reduce, step);
  testing::QueuedDevice gpu;
  OpClock clock(gpu, std::vector<bool>(ops.size(), false));
  clock.Start();  // host time 0
  schedules::RankRecord record = testing::EmptyRecord(ops.size());
  FakeReplicaGroup group;
  GradReducer reducer(s, &group, clock, &record.ops);
  std::vector<float> grads(8, 1.0f);
  gpu.host_ns = 100'000;
  gpu.queue_ns = 500'000;  // the last backward ends on the device at 500 µs
  reducer.Post(reduce, ops[reduce], grads.data(), static_cast<int64_t>(grads.size()));
  gpu.host_ns = 3'000'000;
  group.completed_ns = 800'000;
  reducer.Finish(ops[step]);
  clock.Resolve(&record);
  EXPECT_EQ(group.waits, 1);
  EXPECT_EQ(record.ops[reduce].start_ns, 500'000);
  EXPECT_EQ(record.ops[reduce].end_ns, 800'000);
}

}  // namespace
}  // namespace stagecraft::exec
