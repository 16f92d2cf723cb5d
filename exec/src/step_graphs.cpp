// Step graphs' plan (step_graphs.h).
#include "stagecraft/exec/step_graphs.h"

#include <algorithm>

#include <fmt/format.h>

#include "stagecraft/schedules/op_kinds.h"

namespace stagecraft::exec {
namespace {

using schedules::Op;

// Why the rank's list cannot be replayed step by step; empty when it can.
std::string WhyNotRepeating(const schedules::Schedule& s, const std::vector<Op>& ops) {
  if (ops.empty() || s.steps <= 0 || ops.size() % static_cast<size_t>(s.steps) != 0) {
    return fmt::format("the rank's {} ops do not split into {} equal steps", ops.size(), s.steps);
  }
  const size_t per_step = ops.size() / static_cast<size_t>(s.steps);
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    const Op& first = ops[i % per_step];
    const int step = static_cast<int>(i / per_step);
    Op same = op;
    same.step = first.step;
    same.version = first.version;
    // A transfer names no weight version (0 in every step); the others read the step's own.
    const bool versions_follow = schedules::IsComm(op.kind) || op.version - op.step == first.version - first.step;
    if (op.step != step || !(same == first) || !versions_follow) {
      return fmt::format("step {} of the rank's list is not step 0's ops in step 0's order (op {}: {})", op.step, i,
                         schedules::ActionString(op, s.microbatches));
    }
  }
  return {};
}

// Why the job cannot be captured at all (the same on every rank); empty when it can.
std::string WhyNotJob(const schedules::Schedule& s, const StepGraphConditions& c) {
  if (!c.requested) return "not asked for (execute --graphs on)";
  if (!c.device_has_graphs) return "the device runs each call as it is made (no graphs)";
  if (c.replicas) return "data-parallel replicas sum their gradients through the host each step";
  if (c.optimizer_on_host) return "the optimizer runs on the host";
  if (c.pipemare) return "PipeMare's correction moves the weights around each backward";
  if (c.faults) return "an injected fault changes one step";
  if (s.weights != schedules::WeightPolicy::kFlush) {
    return fmt::format("the {} weight policy keeps more than one weight version", schedules::PolicyName(s.weights));
  }
  return {};
}

// The plan of `rank`'s own list, the job's conditions met.
StepGraphPlan PlanRank(const schedules::Schedule& s, int rank, const StepGraphConditions& c) {
  StepGraphPlan plan;
  const auto refuse = [&](std::string why) {
    plan.why_not = std::move(why);
    return plan;
  };
  const std::vector<Op>& ops = s.ops.at(static_cast<size_t>(rank));
  const auto captured = [&](const Op& op) {
    return schedules::IsCompute(op.kind) || (schedules::IsComm(op.kind) && c.transfers_captured);
  };
  for (const Op& op : ops) {
    if (captured(op) || schedules::ProducesVersion(op.kind)) continue;
    const std::string action = schedules::ActionString(op, s.microbatches);
    if (schedules::IsComm(op.kind)) {
      return refuse(fmt::format("{} needs the host between compute ops (the transport carries out each transfer on "
                                "the host: mpi, host-staged; nccl's are recorded)",
                                action));
    }
    return refuse(fmt::format("{} needs the host between compute ops (collectives and copies are issued as they come)",
                              action));
  }
  if (std::string why = WhyNotRepeating(s, ops); !why.empty()) return refuse(std::move(why));
  if (s.steps < plan.capture_step + 2) {
    return refuse(fmt::format("a run of {} steps replays fewer than two (step 0 runs as it comes, step {} is captured)",
                              s.steps, plan.capture_step));
  }
  plan.ops_per_step = static_cast<int>(ops.size() / static_cast<size_t>(s.steps));
  plan.segment_of.assign(static_cast<size_t>(plan.ops_per_step), -1);
  bool open = false;
  for (int k = 0; k < plan.ops_per_step; ++k) {
    if (!captured(ops[static_cast<size_t>(k)])) {
      open = false;
      continue;
    }
    if (!open) ++plan.segments;
    open = true;
    plan.segment_of[static_cast<size_t>(k)] = plan.segments - 1;
  }
  const bool passes = std::any_of(ops.begin(), ops.begin() + plan.ops_per_step,
                                  [](const Op& op) { return schedules::IsCompute(op.kind); });
  if (!passes) return refuse("the rank's steps have no compute pass to capture");
  plan.enabled = true;
  return plan;
}

}  // namespace

// A pipeline whose transfers are recorded is captured on every rank or on none: a transfer
// recorded into a graph is matched by its peer's recorded one (NCCL's captured sends and
// receives are its peer's captured ones). Each rank decides the same from the whole schedule,
// with no exchange.
StepGraphPlan PlanStepGraphs(const schedules::Schedule& s, int rank, const StepGraphConditions& c) {
  const auto refused = [](std::string why) {
    StepGraphPlan plan;
    plan.why_not = std::move(why);
    return plan;
  };
  if (std::string why = WhyNotJob(s, c); !why.empty()) return refused(std::move(why));
  StepGraphPlan plan = PlanRank(s, rank, c);
  for (int other = 0; plan.enabled && c.transfers_captured && other < s.ranks(); ++other) {
    if (other == rank) continue;
    const StepGraphPlan theirs = PlanRank(s, other, c);
    if (!theirs.enabled) {
      return refused(fmt::format("rank {} is not captured ({}), and a pipeline's ranks are captured together (a "
                                 "recorded transfer meets its peer's recorded one)",
                                 other, theirs.why_not));
    }
  }
  return plan;
}

std::vector<WindowCopy> WindowCopies(int64_t first, int64_t count, int64_t dataset_microbatches) {
  std::vector<WindowCopy> copies;
  if (count <= 0 || dataset_microbatches <= 0) return copies;
  for (int64_t slot = 0; slot < count;) {
    const int64_t from = (first + slot) % dataset_microbatches;
    const int64_t run = std::min(count - slot, dataset_microbatches - from);
    copies.push_back({from, slot, run});
    slot += run;
  }
  return copies;
}

StepIdle IdleBetweenOps(const std::vector<Op>& ops, const std::vector<schedules::OpTiming>& timings,
                        const StepGraphPlan& plan, int from_step) {
  StepIdle idle;
  const schedules::OpTiming* previous = nullptr;
  int previous_index = -1;
  for (size_t i = 0; i < ops.size() && i < timings.size(); ++i) {
    const schedules::OpTiming& t = timings[i];
    if (!schedules::RunsOnCompute(ops[i].kind) || t.start_ns < 0 || t.end_ns < 0) continue;
    if (previous != nullptr && ops[i].step >= from_step) {
      const int64_t gap = std::max<int64_t>(0, t.start_ns - previous->end_ns);
      ++idle.ops;
      idle.idle_ns += gap;
      if (plan.enabled && plan.ops_per_step > 0) {
        const auto segment = [&](int at) { return plan.segment_of[static_cast<size_t>(at % plan.ops_per_step)]; };
        const int here = static_cast<int>(i);
        if (ops[static_cast<size_t>(previous_index)].step == ops[i].step && segment(here) >= 0 &&
            segment(here) == segment(previous_index)) {
          ++idle.passes;
          idle.pass_idle_ns += gap;
        }
      }
    }
    previous = &t;
    previous_index = static_cast<int>(i);
  }
  return idle;
}

}  // namespace stagecraft::exec
