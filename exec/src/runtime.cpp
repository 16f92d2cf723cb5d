// RunRank: one rank's walk over its op list (see runtime.h). The walker runs each op's math and
// calls the units beside it: the weight store (weight_store.h), the mailbox (mailbox.h), the
// replicas' all-reduces (grad_reducer.h), the op clock (op_clock.h), the step reporter
// (step_reporter.h), memory sampling and injected faults; with step graphs (step_graphs.h) it
// captures one step's compute passes and launches them again every later step.
#include "stagecraft/exec/runtime.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/exec/activation_copies.h"
#include "stagecraft/exec/fault_injector.h"
#include "stagecraft/exec/grad_reducer.h"
#include "stagecraft/exec/mailbox.h"
#include "stagecraft/exec/memory_sampler.h"
#include "stagecraft/exec/op_clock.h"
#include "stagecraft/exec/setup_rounds.h"
#include "stagecraft/exec/step_graphs.h"
#include "stagecraft/exec/step_replay.h"
#include "stagecraft/exec/step_reporter.h"
#include "stagecraft/exec/weight_store.h"
#include "stagecraft/schedules/edges.h"
#include "stagecraft/schedules/tensors.h"
#include "stagecraft/schedules/unit_index.h"

namespace stagecraft::exec {
namespace {

using schedules::Edge;
using schedules::Op;
using schedules::OpKind;
using schedules::Schedule;

// The rank this process runs, checked before anything reads its op list.
int RankIn(const Schedule& s, const Transport& t) {
  SC_CHECK(s.lowered, "the runtime runs lowered schedules");
  SC_CHECK(t.rank() < s.ranks(), "one process per pipeline rank");
  return t.rank();
}

int64_t NsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
}

// A rank's run before its first op: no op timed yet, one weight version per stage.
RankRun EmptyRun(size_t ops) {
  RankRun run;
  run.record.ops.assign(ops, schedules::OpTiming{});
  run.record.peak_weight_versions = 1;
  return run;
}

class Runner {
 public:
  Runner(const Schedule& s, const TrainingConfig& c, const Dataset& d, Device& dev, Transport& t, const RunHooks& h,
         ReplicaGroup* replicas)
      : s_(s),
        config_(c),
        data_(d),
        device_(dev),
        transport_(t),
        hooks_(h),
        rank_(RankIn(s, t)),
        ops_(s.ops[rank_]),
        replay_(PlanStepGraphs(s, rank_, StepGraphConditionsOf(c, dev, t, h, replicas)), dev, d, s.microbatches),
        setup_(t),
        run_(EmptyRun(ops_.size())),
        weights_(s, rank_, dev, c),
        reporter_(s, rank_, dev, c.loss_scale, h.on_step, replay_.on()),
        clock_(dev, ResolvePoints(ops_, s.steps, reporter_.step_ends()), t.deadline()),
        mailbox_(s, rank_, dev, t, clock_, BoundaryFloats(c), &run_.record.ops),
        replicas_(replicas),
        reducer_(s, replicas, clock_, &run_.record.ops),
        memory_(dev),
        faults_(h, rank_) {
    for (int chunk = 0; chunk < s.shape.chunks; ++chunk) {
      const int stage = s.shape.StageOf(rank_, chunk);
      SC_CHECK(s.shape.ChunkOf(stage) == chunk, "a stage's chunk is its index among the rank's stages");
      models_.push_back(MakeStage(device_, s, c, stage));
      weights_.AddStage(stage, *models_.back());
      setup_.Beat();
    }
  }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  RankRun Run() {
    // Every rank has built its stages: the clocks start together.
    NamingTimeout([&] { setup_.Finish(); }, [&] { return "the set-up before " + s_.name; });
    // What the run's transfers and sums need is made ready at the sizes the run moves, so no
    // timed op waits for a connection (nccl connects here; the ranks meet again after it).
    NamingTimeout([&] { transport_.Prepare(Routes(s_, BoundaryFloats(config_))); },
                  [&] { return "connecting the ranks for " + s_.name; });
    // Every replica's pipeline is set up too: the clocks of the whole job start together.
    if (replicas_ != nullptr) {
      NamingTimeout([&] { replicas_->Prepare(SumSizes(ops_, [&](int stage) { return Model(stage).ParamFloats(); })); },
                    [&] { return "connecting the replicas for " + s_.name; });
      NamingTimeout([&] { replicas_->host().Barrier(); }, [&] { return "the replicas' set-up before " + s_.name; });
    }
    memory_.Start((data_.inputs.size() + data_.targets.size()) * static_cast<int64_t>(sizeof(float)) +
                  reporter_.bytes());
    // The host tier's use before the run, but for what the weight store keeps there (the
    // optimizer on the host, spilled stages' state): part of the run's host memory, as the
    // simulator counts it.
    const int64_t host_base = device_.memory().bytes_in_use(MemoryTier::kHost) - weights_.HostBytes();
    clock_.Start();
    run_.clock_origin_ns = clock_.start_ns();
    run_.clock_id = ClockId();
    const auto loop_start = std::chrono::steady_clock::now();
    bool resolve_due = false;
    for (int i = 0; i < static_cast<int>(ops_.size()); ++i) {
      if (replay_.on()) {
        GraphStep(i, &resolve_due);
      } else {
        Execute(i, ops_[i]);
      }
      mailbox_.AfterOp(i);
      if (!copy_waits_.empty()) copies_.Release();
      if (!reducer_.empty()) reducer_.Poll();
      memory_.Sample(clock_.Now(), &run_.record);
      // A step's stamps are read back (and its losses reported) once the SENDs right behind its
      // last op are posted: a peer waits for those, and reporting takes 0.1-1 ms.
      resolve_due = resolve_due || clock_.ResolvesAfter(i);
      if (resolve_due && DefersResolve(i)) {
        // A step launched from graphs has its stamps read once the next step's first launch is
        // queued (its instance records other events): the device does not wait for the host
        // between steps.
        if (deferred_resolve_ < 0) deferred_resolve_ = i;
      } else if (resolve_due && !SendFollows(ops_, i)) {
        Resolve(i);
        resolve_due = false;
      }
    }
    mailbox_.FinishSends();
    Resolve(static_cast<int>(ops_.size()) - 1);
    run_.host_loop_ns = NsSince(loop_start);
    device_.streams().Synchronize();
    replay_.Release();
    copies_.Release(true);
    SC_CHECK(mailbox_.empty() && reducer_.empty() && saved_.empty() && loss_grads_.empty() && copies_.empty(),
             "every transfer, all-reduce, activation and copy was consumed");
    if (!copy_waits_.empty() || config_.optimizer_on_host) {  // copies of any tensor, or state on the host
      run_.record.peak_host_memory_bytes = device_.memory().peak_bytes(MemoryTier::kHost) - host_base;
    }
    for (int chunk = 0; chunk < s_.shape.chunks && hooks_.keep_final_params; ++chunk) {
      const int64_t n = models_[chunk]->ParamFloats();
      std::vector<float> host(static_cast<size_t>(n));
      const int stage = s_.shape.StageOf(rank_, chunk);
      if (weights_.newest_tier(stage) == MemoryTier::kHost) {  // spilled: back on the host
        std::copy_n(weights_.Newest(stage), n, host.data());
      } else {
        device_.memory().Download(host.data(), weights_.Newest(stage), n);
      }
      run_.final_params.push_back(std::move(host));
    }
    run_.record.losses = reporter_.MeanLosses();
    // The loss of a D·b microbatch is the mean of its D slices' (each a mean over b samples).
    if (replicas_ != nullptr) {
      run_.record.losses = NamingTimeout([&] { return MeanOverReplicas(replicas_->host(), run_.record.losses); },
                                         [&] { return "the losses' mean over the replicas of " + s_.name; });
    }
    run_.record.peak_weight_versions = weights_.peak_versions();
    return std::move(run_);
  }

 private:
  StageModel& Model(int stage) { return *models_[static_cast<size_t>(s_.shape.ChunkOf(stage))]; }
  // The dataset's microbatch an op reads: runs longer than the dataset cycle through it.
  int64_t Sample(const Op& op) const {
    return data_.MicrobatchOf(static_cast<int64_t>(op.step) * s_.microbatches + op.microbatch);
  }

  void Execute(int i, const Op& op) {
    if (faults_.Due(op)) faults_.Inject(op, s_.microbatches, device_, weights_.Newest(op.stage));
    if (schedules::ReducesGradients(op.kind)) {
      int64_t floats = 0;
      float* grads = weights_.OpenGradients(op, &floats);
      return reducer_.Post(i, op, grads, floats);
    }
    // A STEP applies the replicas' summed gradients: waiting for them is not compute.
    if (schedules::ProducesVersion(op.kind)) reducer_.Finish(op);
    if (const std::optional<Edge> edge = schedules::CommEdge(s_.shape, op)) {
      const Mailbox::Stamps stamps = mailbox_.Post(i, *edge);
      if (stamps.end >= 0) replay_.Captured(i, stamps.start, stamps.end, /*end_elsewhere=*/true);
      return;
    }
    if (schedules::IsCopy(op.kind)) return Copy(i, op);
    // A compute op reading a reloaded unit waits for the reload on the device.
    if (!copy_waits_.empty() && !copy_waits_[static_cast<size_t>(i)].empty()) copies_.Wait();
    // Compute: its input must be here before its clock starts (waiting is not compute). The
    // last stage's backward reads the loss gradient its own forward left.
    Buffer input;
    if (const std::optional<Edge> in = schedules::InputEdge(s_.shape, op)) {
      input = mailbox_.Take(*in);
    } else if (schedules::IsConsumerOf(op.kind, schedules::Flow::kGradient)) {
      input = TakeLossGradient(op);
    }
    const int start = clock_.Begin();
    NamingOom(op, [&] {
      switch (op.kind) {
        case OpKind::kF: Forward(op, std::move(input)); break;
        case OpKind::kB:
        case OpKind::kI:
          weights_.Correct(i, op, true);  // PipeMare's: the weights moved back towards its F's
          Backward(op, std::move(input));
          weights_.Correct(i, op, false);
          break;
        case OpKind::kW: BackwardWeight(op); break;
        case OpKind::kStep: weights_.Step(i, op); break;
        default: SC_CHECK(false, "unhandled op kind");
      }
    });
    const int end = clock_.End(i, start);
    replay_.Captured(i, start, end);
    if (!schedules::ProducesVersion(op.kind)) weights_.Release(i, op);
  }

  // Op i under step graphs: steps before the capture step run as they come; the capture step's
  // compute passes (and the transfers between them, where the transport records them) are
  // captured segment by segment, each launched as its capture ends; a later
  // step launches each segment at its first op and only keeps the host's books for the passes
  // in it (the gradient buffers they add into, checked to be the captured ones). STEPs run as
  // they come. A Resolve deferred by the loop is made right after the step's first launch.
  void GraphStep(int i, bool* resolve_due) {
    const Op& op = ops_[i];
    const StepReplay::Place at = replay_.PlaceOf(i);
    if (op.step < replay_.plan().capture_step) return Execute(i, op);
    if (at.offset == 0) replay_.FillWindows(op.step);
    bool resolve_now = false;
    if (at.segment < 0) {
      Execute(i, op);
    } else if (op.step == replay_.plan().capture_step) {
      try {
        if (at.first) {
          transport_.BeginCapture();
          replay_.BeginCapture(at.segment);
        }
        Execute(i, op);
        if (at.last) {
          transport_.EndCapture();  // the segment's transfers joined into it
          replay_.EndCapture(at.segment);
        }
      } catch (...) {
        transport_.AbandonCapture();
        replay_.AbandonCapture();
        throw;
      }
    } else {
      if (at.first) {
        replay_.Launch(at.segment, op.step);
        resolve_now = *resolve_due && deferred_resolve_ >= 0;
        if (resolve_now) Resolve(deferred_resolve_);  // before this launch's stamps join the clock's
        replay_.TimeLaunch(at.segment, op.step, i - at.offset, clock_);
      }
      KeepBooks(i, op);
    }
    if (replay_.LastCapturedOf(i)) reporter_.CommitScratch(op.step);
    if (resolve_now) {
      *resolve_due = false;
      deferred_resolve_ = -1;
    }
  }
  bool DefersResolve(int i) const {
    return replay_.on() && ops_[i].step >= replay_.plan().capture_step && ops_[i].step + 1 < s_.steps;
  }

  // What a replayed pass changes on the host: the update's count of backwards (and so its
  // gradient buffer, which must be the one the graph adds into) and the weights' release.
  void KeepBooks(int i, const Op& op) {
    if (!schedules::IsCompute(op.kind)) return;  // a transfer: the graph carries it out
    if (schedules::WritesWeightGrads(op.kind)) {
      SC_CHECK(replay_.SameGrads(i, weights_.Gradients(op)),
               fmt::format("a replayed {} (step {}) adds into the gradient buffer its capture did",
                           schedules::ActionString(op, s_.microbatches), op.step));
    }
    weights_.Release(i, op);
  }

  // The stamps taken so far (up to op `last`) become op times; then the steps the last stage has
  // finished meanwhile are reported. The receives whose consumers the device was ordered after
  // come first: the device cannot reach the stamps without them, and a wait for one names it.
  void Resolve(int last) {
    const auto start = std::chrono::steady_clock::now();
    mailbox_.FinishReceives();
    mailbox_.FinishCaptured();
    NamingTimeout(
        [&] {
          transport_.Flush();
          clock_.Resolve(&run_.record);
        },
        [&] {
      if (last < 0) return std::string("the device's work");
      return fmt::format("the device's work up to {} (step {})", schedules::ActionString(ops_[last], s_.microbatches),
                         ops_[last].step);
    });
    reporter_.Report(run_.record);
    run_.host_wait_ns += NsSince(start);
  }

  // Runs `work`, op `op`'s, naming the op in an OutOfMemory it throws.
  template <class Work>
  void NamingOom(const Op& op, Work&& work) {
    try {
      work();
    } catch (const OutOfMemory& e) {
      throw OutOfMemory(fmt::format("out of memory at {} (step {}): {}", schedules::ActionString(op, s_.microbatches),
                                    op.step, e.what()));
    }
  }

  // OFFLOAD / RELOAD of a unit's activations, or of a weight version or optimizer state (the
  // weight store's).
  void Copy(int i, const Op& op) {
    if (op.tensor != schedules::Tensor::kActivations) {
      return NamingOom(op, [&] { weights_.Copy(i, op, clock_); });
    }
    const size_t unit = units_(op);
    NamingOom(op, [&] {
      if (op.kind == OpKind::kOffload) {
        copies_.Offload(unit, &saved_.at(unit), clock_, i);
        saved_.erase(unit);
      } else {
        saved_[unit] = copies_.Reload(unit, clock_, i);
      }
    });
  }

  void Forward(const Op& op, Buffer x) {
    StageModel& model = Model(op.stage);
    if (op.stage == 0) {
      x = Buffer(device_, model.InputFloats());
      device_.memory().Copy(x.data(),
                            replay_.Windowed(op.step) ? replay_.InputOf(op.microbatch)
                                                      : data_.inputs.data() + Sample(op) * x.size(),
                            x.size());
    }
    Activations& saved = saved_[units_(op)];
    Buffer y = model.Forward(weights_.Read(op), std::move(x), &saved, !s_.recompute);
    if (const std::optional<Edge> out = schedules::OutputEdge(s_.shape, op)) return mailbox_.Put(*out, std::move(y));
    // The loss writes its gradient over the output it reads (each row read before it is written):
    // the output and its gradient are one buffer, not two side by side (the logits' are the
    // largest tensor of a GPT's last stage).
    const float* targets = replay_.Windowed(op.step) ? replay_.TargetsOf(op.microbatch)
                                                     : data_.targets.data() + Sample(op) * loss_.target_floats;
    device_.ops().loss.forward(device_.op_context(), loss_.kind, loss_.rows, loss_.cols, y.data(), targets, y.data(),
                               replay_.Windowed(op.step) ? reporter_.ScratchLossOf(op) : reporter_.LossOf(op),
                               config_.loss_scale);
    loss_grads_[units_(op)] = std::move(y);
  }

  void Backward(const Op& op, Buffer dout) {
    StageModel& model = Model(op.stage);
    const size_t unit = units_(op);
    Activations& saved = saved_.at(unit);
    const float* w = weights_.Read(op);
    if (s_.recompute) model.Recompute(w, &saved);
    const GradTarget grads = schedules::WritesWeightGrads(op.kind) ? weights_.Gradients(op) : GradTarget{};
    if (schedules::WritesWeightGrads(op.kind)) replay_.CapturedGrads(OpIndex(op), grads);
    Buffer dx = model.Backward(w, std::move(dout), &saved, grads);
    if (schedules::Info(op.kind).memory.w_stash == 0) saved_.erase(unit);  // an I keeps them for its W
    if (const std::optional<Edge> out = schedules::OutputEdge(s_.shape, op)) mailbox_.Put(*out, std::move(dx));
  }

  void BackwardWeight(const Op& op) {
    const size_t unit = units_(op);
    const GradTarget grads = weights_.Gradients(op);
    replay_.CapturedGrads(OpIndex(op), grads);
    Model(op.stage).BackwardWeight(&saved_.at(unit), grads);
    saved_.erase(unit);
  }

  int OpIndex(const Op& op) const { return static_cast<int>(&op - ops_.data()); }

  Buffer TakeLossGradient(const Op& op) {
    auto it = loss_grads_.find(units_(op));
    SC_CHECK(it != loss_grads_.end(), "the last stage's backward follows its forward");
    Buffer b = std::move(it->second);
    loss_grads_.erase(it);
    return b;
  }

  const Schedule& s_;
  const TrainingConfig& config_;
  const Dataset& data_;
  Device& device_;
  Transport& transport_;
  const RunHooks& hooks_;
  const int rank_;
  const std::vector<Op>& ops_;
  StepReplay replay_;  // step graphs: off unless planned
  SetupRounds setup_;
  RankRun run_;
  std::vector<std::unique_ptr<StageModel>> models_;  // by chunk
  WeightStore weights_;
  StepReporter reporter_;
  OpClock clock_;
  Mailbox mailbox_;
  ReplicaGroup* replicas_;  // null with one replica
  GradReducer reducer_;
  MemorySampler memory_;
  FaultInjector faults_;
  const schedules::UnitIndex units_{s_};
  const LossShape loss_ = LossShapeFor(config_);
  std::unordered_map<size_t, Activations> saved_;  // by unit: what each microbatch's backward reads
  std::unordered_map<size_t, Buffer> loss_grads_;  // by unit, on the last stage
  ActivationCopies copies_{device_};
  const std::vector<std::vector<int32_t>> copy_waits_ = schedules::CopyWaits(ops_);  // empty without copies
  // The op after which a Resolve deferred under step graphs reads (-1: none).
  int deferred_resolve_ = -1;
};

}  // namespace

StepGraphConditions StepGraphConditionsOf(const TrainingConfig& c, Device& dev, const Transport& t, const RunHooks& h,
                                          const ReplicaGroup* replicas) {
  return StepGraphConditions{.device_has_graphs = dev.graphs() != nullptr,
                             .requested = h.step_graphs,
                             .replicas = replicas != nullptr,
                             .optimizer_on_host = c.optimizer_on_host,
                             .pipemare = c.pipemare.has_value(),
                             .faults = h.fault_rank >= 0,  // every rank alike: a pipeline captures together
                             .transfers_captured = t.CapturesTransfers()};
}

RankRun RunRank(const Schedule& schedule, const TrainingConfig& config, const Dataset& data, Device& device,
                Transport& transport, const RunHooks& hooks, ReplicaGroup* replicas) {
  Runner runner(schedule, config, data, device, transport, hooks, replicas);
  return runner.Run();
}

}  // namespace stagecraft::exec
