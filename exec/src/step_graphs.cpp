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
    if (op.step != step || !(same == first) || op.version - op.step != first.version - first.step) {
      return fmt::format("step {} of the rank's list is not step 0's ops in step 0's order (op {}: {})", op.step, i,
                         schedules::ActionString(op, s.microbatches));
    }
  }
  return {};
}

}  // namespace

StepGraphPlan PlanStepGraphs(const schedules::Schedule& s, int rank, const StepGraphConditions& c) {
  StepGraphPlan plan;
  const auto refuse = [&](std::string why) {
    plan.why_not = std::move(why);
    return plan;
  };
  if (!c.requested) return refuse("not asked for (execute --graphs on)");
  if (!c.device_has_graphs) return refuse("the device runs each call as it is made (no graphs)");
  if (c.replicas) return refuse("data-parallel replicas sum their gradients through the host each step");
  if (c.optimizer_on_host) return refuse("the optimizer runs on the host");
  if (c.pipemare) return refuse("PipeMare's correction moves the weights around each backward");
  if (c.faults) return refuse("an injected fault changes one step");
  if (s.weights != schedules::WeightPolicy::kFlush) {
    return refuse(fmt::format("the {} weight policy keeps more than one weight version",
                              schedules::PolicyName(s.weights)));
  }
  const std::vector<Op>& ops = s.ops.at(static_cast<size_t>(rank));
  for (const Op& op : ops) {
    if (!schedules::IsCompute(op.kind) && !schedules::ProducesVersion(op.kind)) {
      return refuse(fmt::format("{} needs the host between compute ops (transfers, collectives and copies are issued "
                                "as they come)",
                                schedules::ActionString(op, s.microbatches)));
    }
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
    if (!schedules::IsCompute(ops[static_cast<size_t>(k)].kind)) {
      open = false;
      continue;
    }
    if (!open) ++plan.segments;
    open = true;
    plan.segment_of[static_cast<size_t>(k)] = plan.segments - 1;
  }
  if (plan.segments == 0) return refuse("the rank's steps have no compute pass to capture");
  plan.enabled = true;
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
        if (previous_index == here - 1 && here % plan.ops_per_step != 0 && segment(here) >= 0 &&
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
