// RunRank: one rank's walk over its op list (see runtime.h).
#include "stagecraft/exec/runtime.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/exec/optimizer.h"
#include "stagecraft/exec/setup_rounds.h"
#include "stagecraft/schedules/edges.h"
#include "stagecraft/schedules/unit_index.h"
#include "stagecraft/schedules/weights.h"


namespace stagecraft::exec {
namespace {

using schedules::Op;
using schedules::OpKind;
using schedules::Schedule;
using schedules::Edge;

// What one local stage owns: its math, weight versions, gradient accumulators, optimizer state.
struct LocalStage {
  LocalStage(std::unique_ptr<StageModel> m, Device& device, const TrainingConfig& config)
      : model(std::move(m)), optimizer(device, config, model->ParamFloats()) {}
  std::unique_ptr<StageModel> model;
  Optimizer optimizer;
  std::map<int, Buffer> versions;
  int newest = 0;
  std::map<int64_t, Buffer> grads;  // by update index
  // Gradient buffers holding zeros, for the next updates to add into: made zero once, then left
  // zeroed by the STEP that consumes them (kernels/host.h). One per stage is made before the
  // run (the simulator holds a stage's gradients throughout); an update that starts while
  // another is still open gets one more.
  std::vector<Buffer> zeroed_grads;
  std::map<int64_t, int> grad_count;
  std::map<int, int> last_reader;  // version -> index of its last reading op on this rank
};

struct TimedOp {
  int op = 0;     // index in the rank's op list
  int start = 0;  // Device stamps around it
  int end = 0;
};

struct Pending {
  Transport::Request request = 0;
  Buffer buffer;
  int op_index = 0;
};

class Runner {
 public:
  Runner(const Schedule& s, const TrainingConfig& c, const Dataset& d, Device& dev, Transport& t, const RunHooks& h)
      : s_(s), config_(c), data_(d), device_(dev), transport_(t), hooks_(h), rank_(t.rank()), setup_(t) {
    SC_CHECK(s.lowered, "the runtime runs lowered schedules");
    SC_CHECK(rank_ < s.ranks(), "one process per pipeline rank");
    for (int chunk = 0; chunk < s.shape.chunks; ++chunk) {
      const int stage = s.shape.StageOf(rank_, chunk);
      chunk_of_[stage] = chunk;
      stages_.emplace_back(MakeStage(device_, s, c, stage), device_, c);
      LocalStage& ls = stages_.back();
      Buffer w(device_, ls.model->ParamFloats());
      ls.model->InitParams(w.data());
      ls.versions.emplace(0, std::move(w));
      ls.zeroed_grads.push_back(ZeroedBuffer(ls.model->ParamFloats()));
      setup_.Beat();
    }
    const auto& ops = s.ops[rank_];
    const int last_stage = s.stages() - 1;
    std::vector<int> last_compute_of_step(s.steps, -1);
    for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
      if (const int version = schedules::VersionRead(ops[i]); version >= 0) Local(ops[i].stage).last_reader[version] = i;
      // A step is over, for its progress report, at the last stage's last STEP of that step.
      if (ops[i].kind == OpKind::kStep && ops[i].stage == last_stage) step_ends_at_[ops[i].step] = i;
      if (schedules::IsCompute(ops[i].kind)) last_compute_of_step[ops[i].step] = i;
    }
    // Op times (and the last stage's losses) are read back from the device once per step.
    resolve_after_.assign(ops.size(), false);
    // The last stage's rank reads them back once that step's STEP is done too, so a step is
    // reported (and kept in the progress file) as soon as it is over.
    for (int t = 0; t < s.steps; ++t) {
      int i = last_compute_of_step[t];
      if (const auto end = step_ends_at_.find(t); end != step_ends_at_.end()) i = std::max(i, end->second);
      if (i >= 0) resolve_after_[i] = true;
    }
    loss_sum_.assign(s.steps, 0.0);
    if (s.shape.RankOf(last_stage) == rank_) losses_ = Buffer(device_, static_cast<int64_t>(s.steps) * s.microbatches);
    run_.record.ops.assign(ops.size(), schedules::OpTiming{});
    run_.record.peak_weight_versions = 1;
  }

  RankRun Run() {
    // Every rank has built its stages: the clocks start together.
    NamingTimeout([&] { setup_.Finish(); }, [&] { return "the set-up before " + s_.name; });
    base_bytes_ = (data_.inputs.size() + data_.targets.size() + losses_.size()) * static_cast<int64_t>(sizeof(float));
    device_.ResetPeak();
    device_.Synchronize();
    device_.ClearStamps();
    start_ns_ = device_.NowNs();
    const auto& ops = s_.ops[rank_];
    for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
      Execute(i, ops[i]);
      // A SEND right behind its producer is posted before polling: a poll can finish a receive
      // (its copy takes tens of microseconds), and the peer waiting for this tensor would wait
      // that much longer.
      if (i + 1 == static_cast<int>(ops.size()) || !schedules::IsSend(ops[i + 1].kind)) Poll();
      SampleMemory();
      if (resolve_after_[i]) ResolveTimes();
    }
    for (Pending& p : sends_) Finish(p);
    sends_.clear();
    ResolveTimes();
    device_.Synchronize();
    SC_CHECK(recvs_.empty() && mailbox_.empty() && saved_.empty() && loss_grads_.empty(),
             "every transfer and activation was consumed");
    for (int chunk = 0; chunk < s_.shape.chunks && hooks_.keep_final_params; ++chunk) {
      LocalStage& ls = stages_[chunk];
      std::vector<float> host(static_cast<size_t>(ls.model->ParamFloats()));
      device_.Download(host.data(), ls.versions.at(ls.newest).data(), ls.model->ParamFloats());
      run_.final_params.push_back(std::move(host));
    }
    if (!losses_.empty()) {
      for (int t = 0; t < s_.steps; ++t) run_.record.losses.push_back(loss_sum_[t] / s_.microbatches);
    }
    return std::move(run_);
  }

 private:
  int64_t Now() { return device_.NowNs() - start_ns_; }
  LocalStage& Local(int stage) { return stages_.at(chunk_of_.at(stage)); }
  // Where a tensor waits between producer and consumer; also the transfer's tag.
  int64_t Key(const Edge& edge) const { return static_cast<int64_t>(schedules::EdgeKey(units_, edge)); }
  int64_t Global(const Op& op) const { return static_cast<int64_t>(op.step) * s_.microbatches + op.microbatch; }
  // The dataset's microbatch an op reads: runs longer than the dataset cycle through it.
  int64_t Sample(const Op& op) const { return data_.MicrobatchOf(Global(op)); }

  void Execute(int i, const Op& op) {
    if (schedules::IsCompute(op.kind) && rank_ == hooks_.fault_rank && op.step == hooks_.fault_step && !fault_done_) {
      InjectFault(op);
    }
    if (const std::optional<Edge> edge = schedules::CommEdge(s_.shape, op)) {
      return schedules::IsSend(op.kind) ? Send(i, Key(*edge), op.peer) : Recv(i, Key(*edge), op.peer);
    }
    // Compute: its input must be here before its clock starts (waiting is not compute). The
    // last stage's backward reads the loss gradient its own forward left.
    Buffer input;
    if (const std::optional<Edge> in = schedules::InputEdge(s_.shape, op)) {
      input = TakeInput(Key(*in));
    } else if (schedules::IsConsumerOf(op.kind, schedules::Flow::kGradient)) {
      input = TakeLossGradient(op);
    }
    const int start = device_.Stamp();
    try {
      switch (op.kind) {
        case OpKind::kF: Forward(op, std::move(input)); break;
        case OpKind::kB:
        case OpKind::kI: Backward(op, std::move(input)); break;
        case OpKind::kW: BackwardWeight(op); break;
        case OpKind::kStep: Step(i, op); break;
        default: SC_CHECK(false, "unhandled op kind");
      }
    } catch (const OutOfMemory& e) {
      throw OutOfMemory(fmt::format("out of memory at {} (step {}): {}", schedules::ActionString(op, s_.microbatches),
                                    op.step, e.what()));
    }
    timed_.push_back({i, start, device_.Stamp()});
    if (op.kind != OpKind::kStep) ReleaseVersion(i, op.stage, op.version);
  }

  void InjectFault(const Op& op) {
    switch (hooks_.fault) {
      case RunHooks::Fault::kThrow:
        throw std::runtime_error(fmt::format("injected fault at step {} (--inject-fault)", op.step));
      case RunHooks::Fault::kHang:
        std::fprintf(stderr, "stagecraft: rank %d hangs at step %d (--inject-fault)\n", rank_, op.step);
        std::fflush(stderr);
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      case RunHooks::Fault::kOom: {
        fault_done_ = true;
        // An allocation no device can satisfy, made where the op's own buffers are: the real
        // allocator fails and the failure takes the path a full device's would.
        try {
          Buffer too_big(device_, int64_t{1} << 60);
        } catch (const OutOfMemory& e) {
          throw OutOfMemory(fmt::format("out of memory at {} (step {}): {} (--inject-fault)",
                                        schedules::ActionString(op, s_.microbatches), op.step, e.what()));
        }
        return;
      }
      case RunHooks::Fault::kNan: {
        LocalStage& ls = Local(op.stage);
        device_.Fill(ls.versions.at(ls.newest).data(), std::numeric_limits<float>::quiet_NaN(), 1);
        fault_done_ = true;  // once
        return;
      }
    }
  }

  // Turns the stamps taken since the last call into op times; then, for each step the last
  // stage has finished meanwhile, sums its losses (a non-finite one ends the run) and reports it.
  void ResolveTimes() {
    const auto& ops = s_.ops[rank_];
    for (const TimedOp& t : timed_) {
      const int64_t start = device_.StampNs(t.start) - start_ns_, end = device_.StampNs(t.end) - start_ns_;
      run_.record.ops[t.op] = {start, end};
      run_.record.busy_ns += end - start;
      run_.record.last_compute_end_ns = std::max(run_.record.last_compute_end_ns, end);
      if (ops[t.op].kind == OpKind::kF && run_.record.first_f_start_ns < 0) run_.record.first_f_start_ns = start;
    }
    timed_.clear();
    device_.ClearStamps();
    if (losses_.empty()) return;
    for (; reported_steps_ < s_.steps; ++reported_steps_) {
      const int t = reported_steps_;
      const int end_op = step_ends_at_.at(t);
      if (run_.record.ops[end_op].end_ns < 0) return;  // not run yet
      std::vector<float> losses(static_cast<size_t>(s_.microbatches));
      device_.Download(losses.data(), losses_.data() + static_cast<int64_t>(t) * s_.microbatches, s_.microbatches);
      for (int mb = 0; mb < s_.microbatches; ++mb) {
        if (!std::isfinite(losses[mb])) {
          throw std::runtime_error(fmt::format(
              "step {} microbatch {}: loss is {}; training diverged (lower training.lr{})", t, mb, losses[mb],
              config_.loss_scale > 1.0f
                  ? fmt::format(", or training.loss_scale: gradients scaled by {} may have overflowed", config_.loss_scale)
                  : ""));
        }
        loss_sum_[t] += losses[mb];
      }
      if (hooks_.on_step) hooks_.on_step({t, s_.steps, loss_sum_[t] / s_.microbatches, run_.record.ops[end_op].end_ns});
    }
  }

  void Forward(const Op& op, Buffer x) {
    LocalStage& ls = Local(op.stage);
    if (op.stage == 0) {
      x = Buffer(device_, ls.model->InputFloats());
      device_.Copy(x.data(), data_.inputs.data() + Sample(op) * x.size(), x.size());
    }
    Activations& saved = saved_[units_(op)];
    run_.record.peak_inflight = std::max(run_.record.peak_inflight, static_cast<int>(saved_.size()));
    Buffer y = ls.model->Forward(ls.versions.at(op.version).data(), std::move(x), &saved, !s_.recompute);
    if (const std::optional<Edge> out = schedules::OutputEdge(s_.shape, op)) {
      mailbox_[Key(*out)] = std::move(y);
      return;
    }
    Buffer dy(device_, y.size());
    device_.Loss(loss_.kind, loss_.rows, loss_.cols, y.data(), data_.targets.data() + Sample(op) * loss_.target_floats,
                 dy.data(), losses_.data() + Global(op), config_.loss_scale);
    loss_grads_[units_(op)] = std::move(dy);
  }

  void Backward(const Op& op, Buffer dout) {
    LocalStage& ls = Local(op.stage);
    const size_t unit = units_(op);
    Activations& saved = saved_.at(unit);
    const float* w = ls.versions.at(op.version).data();
    if (s_.recompute) ls.model->Recompute(w, &saved);
    const GradTarget grads = op.kind == OpKind::kB ? Gradients(ls, op) : GradTarget{};
    Buffer dx = ls.model->Backward(w, std::move(dout), &saved, grads);
    if (op.kind == OpKind::kB) saved_.erase(unit);
    if (const std::optional<Edge> out = schedules::OutputEdge(s_.shape, op)) mailbox_[Key(*out)] = std::move(dx);
  }

  void BackwardWeight(const Op& op) {
    LocalStage& ls = Local(op.stage);
    const size_t unit = units_(op);
    ls.model->BackwardWeight(&saved_.at(unit), Gradients(ls, op));
    saved_.erase(unit);
  }

  Buffer ZeroedBuffer(int64_t floats) {
    Buffer b(device_, floats);
    device_.Fill(b.data(), 0.0f, floats);
    return b;
  }

  // The gradient buffer of op's update, which every B and W of the update adds into: it starts
  // as zeros, so the first one needs no BLAS pass that clears its output before adding.
  GradTarget Gradients(LocalStage& ls, const Op& op) {
    const int64_t u = schedules::UpdateIndex(s_, op);
    auto [it, inserted] = ls.grads.try_emplace(u);
    if (inserted) {
      if (ls.zeroed_grads.empty()) ls.zeroed_grads.push_back(ZeroedBuffer(ls.model->ParamFloats()));
      it->second = std::move(ls.zeroed_grads.back());
      ls.zeroed_grads.pop_back();
    }
    ++ls.grad_count[u];
    return {it->second.data(), true};
  }

  void Step(int i, const Op& op) {
    LocalStage& ls = Local(op.stage);
    SC_CHECK(op.version == ls.newest + 1, "a STEP produces the next version");
    const int64_t u = schedules::UpdateIndex(s_, op);
    const int64_t n = ls.model->ParamFloats();
    auto g = ls.grads.find(u);
    SC_CHECK(g != ls.grads.end(), fmt::format("stage {} STEP {}: no gradients for update {}", op.stage, op.version, u));
    // The mean over the update's microbatches, and the loss scale taken back out (both exact:
    // a count times a power of two).
    const float scale = 1.0f / (static_cast<float>(ls.grad_count.at(u)) * config_.loss_scale);
    // In place when the old version has no reader after this STEP (flush schedules); otherwise
    // the update reads the old version and writes the new one into a buffer of its own.
    Buffer w;
    if (steps_in_place_[i]) {
      w = std::move(ls.versions.at(ls.newest));
      ls.versions.erase(ls.newest);
      ls.optimizer.Step(w.data(), w.data(), g->second.data(), scale);
    } else {
      w = Buffer(device_, n);
      ls.optimizer.Step(ls.versions.at(ls.newest).data(), w.data(), g->second.data(), scale);
    }
    ls.zeroed_grads.push_back(std::move(g->second));  // the update left it zeroed
    ls.grads.erase(g);
    ls.grad_count.erase(u);
    const int old = ls.newest;
    ls.versions.emplace(op.version, std::move(w));
    ls.newest = op.version;
    ReleaseVersion(i, op.stage, old);
    run_.record.peak_weight_versions = std::max(run_.record.peak_weight_versions, static_cast<int>(ls.versions.size()));
  }

  // Frees `version` of `stage` after op i when i was its last reader and it is not the newest.
  void ReleaseVersion(int i, int stage, int version) {
    LocalStage& ls = Local(stage);
    if (version == ls.newest || ls.last_reader.at(version) != i) return;
    ls.versions.erase(version);
  }

  void Send(int i, int64_t key, int peer) {
    auto it = mailbox_.find(key);
    SC_CHECK(it != mailbox_.end(), "a SEND follows the op that produced its tensor");
    Pending p;
    p.buffer = std::move(it->second);
    mailbox_.erase(it);
    p.op_index = i;
    run_.record.ops[i].start_ns = Now();
    p.request = transport_.Isend(p.buffer.data(), p.buffer.size(), peer, key);
    sends_.push_back(std::move(p));
  }

  void Recv(int i, int64_t key, int peer) {
    Pending p;
    p.buffer = Buffer(device_, BoundaryFloats(config_));
    p.op_index = i;
    run_.record.ops[i].start_ns = Now();
    p.request = transport_.Irecv(p.buffer.data(), p.buffer.size(), peer, key);
    recvs_.emplace(key, std::move(p));
  }

  Buffer TakeLossGradient(const Op& op) {
    auto it = loss_grads_.find(units_(op));
    SC_CHECK(it != loss_grads_.end(), "the last stage's backward follows its forward");
    Buffer b = std::move(it->second);
    loss_grads_.erase(it);
    return b;
  }

  // The tensor under `key`: produced locally, or received (waiting for it if needed).
  Buffer TakeInput(int64_t key) {
    if (auto it = mailbox_.find(key); it != mailbox_.end()) {
      Buffer b = std::move(it->second);
      mailbox_.erase(it);
      return b;
    }
    auto it = recvs_.find(key);
    SC_CHECK(it != recvs_.end(), "every compute input is produced locally or received");
    Pending& p = it->second;
    Finish(p);
    Buffer b = std::move(p.buffer);
    recvs_.erase(it);
    return b;
  }

  // Waits for a transfer unless Poll already saw it complete (its handle is then released). A
  // wait past the deadline names the op it was for.
  void Finish(Pending& p) {
    if (run_.record.ops[p.op_index].end_ns < 0) {
      NamingTimeout([&] { transport_.Wait(p.request); }, [&] {
        const Op& op = s_.ops[rank_][p.op_index];
        return fmt::format("{} (step {}) {} rank {}", schedules::ActionString(op, s_.microbatches), op.step,
                           schedules::IsSend(op.kind) ? "to" : "from", op.peer);
      });
      run_.record.ops[p.op_index].end_ns = Now();
    }
  }

  // Notes completed transfers (their end time) and frees finished send buffers.
  void Poll() {
    for (size_t j = 0; j < sends_.size();) {
      if (transport_.Test(sends_[j].request)) {
        run_.record.ops[sends_[j].op_index].end_ns = Now();
        sends_[j] = std::move(sends_.back());
        sends_.pop_back();
      } else {
        ++j;
      }
    }
    for (auto& [key, p] : recvs_) {
      if (run_.record.ops[p.op_index].end_ns < 0 && transport_.Test(p.request)) run_.record.ops[p.op_index].end_ns = Now();
    }
  }

  // The timeline samples what is held after each op; the peak is the device's high-water mark,
  // which also sees what an op holds only while it runs (a STEP's new version before the old
  // one is freed).
  void SampleMemory() {
    const int64_t bytes = device_.bytes_in_use() - base_bytes_;
    if (run_.record.memory.empty() || run_.record.memory.back().bytes != bytes) run_.record.memory.push_back({Now(), bytes});
    run_.record.peak_memory_bytes = std::max(run_.record.peak_memory_bytes, device_.peak_bytes() - base_bytes_);
  }

  const Schedule& s_;
  const TrainingConfig& config_;
  const Dataset& data_;
  Device& device_;
  Transport& transport_;
  const RunHooks& hooks_;
  bool fault_done_ = false;
  const int rank_;
  SetupRounds setup_;
  std::vector<LocalStage> stages_;
  std::unordered_map<int, int> chunk_of_;
  const schedules::UnitIndex units_{s_};
  const LossShape loss_ = LossShapeFor(config_);
  const std::vector<bool> steps_in_place_ = schedules::StepsInPlace(s_)[rank_];
  std::unordered_map<size_t, Activations> saved_;        // by unit
  std::unordered_map<size_t, Buffer> loss_grads_;        // by unit, on the last stage
  std::unordered_map<int64_t, Buffer> mailbox_;          // by edge key
  std::vector<Pending> sends_;
  std::unordered_map<int64_t, Pending> recvs_;
  std::vector<double> loss_sum_;
  std::unordered_map<int, int> step_ends_at_;  // step -> index of the last stage's last STEP of it
  std::vector<bool> resolve_after_;            // op index -> read the op times back after it
  std::vector<TimedOp> timed_;                 // compute ops run since the last ResolveTimes
  Buffer losses_;                              // [steps x microbatches] on the last stage's rank
  int reported_steps_ = 0;
  int64_t start_ns_ = 0;
  int64_t base_bytes_ = 0;
  RankRun run_;
};

}  // namespace

RankRun RunRank(const Schedule& schedule, const TrainingConfig& config, const Dataset& data, Device& device,
                Transport& transport, const RunHooks& hooks) {
  Runner runner(schedule, config, data, device, transport, hooks);
  return runner.Run();
}

}  // namespace stagecraft::exec
