// The runtime's data-parallel all-reduces (grad_reducer.h).
#include "stagecraft/exec/grad_reducer.h"

#include <algorithm>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/exec/transport.h"
#include "stagecraft/schedules/edges.h"
#include "stagecraft/schedules/weights.h"

namespace stagecraft::exec {

std::vector<int64_t> SumSizes(const std::vector<schedules::Op>& ops,
                              const std::function<int64_t(int stage)>& floats_of_stage) {
  std::vector<int64_t> sizes;
  for (const schedules::Op& op : ops) {
    if (schedules::ReducesGradients(op.kind)) sizes.push_back(floats_of_stage(op.stage));
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

GradReducer::GradReducer(const schedules::Schedule& schedule, ReplicaGroup* group, OpClock& clock,
                         std::vector<schedules::OpTiming>* times)
    : schedule_(schedule), group_(group), clock_(clock), times_(times) {
  SC_CHECK(schedule.data_parallel <= 1 || (group != nullptr && group->size() == schedule.data_parallel),
           fmt::format("a schedule of {} replicas runs with a replica group of as many ({} here)",
                       schedule.data_parallel, group != nullptr ? group->size() : 1));
}

GradReducer::Key GradReducer::KeyOf(const schedules::Op& op) const {
  return {op.stage, schedules::UpdateIndex(schedule_, op)};
}

void GradReducer::Post(int op_index, const schedules::Op& op, float* grads, int64_t floats) {
  SC_CHECK(group_ != nullptr, "REDUCE_GRAD runs with a replica group");
  clock_.Mark(op_index);  // starts once the backwards that made the gradients have run
  const auto [it, inserted] = pending_.try_emplace(KeyOf(op), Pending{group_->PostSum(grads, floats), op_index});
  SC_CHECK(inserted, "one REDUCE_GRAD per stage and update");
}

void GradReducer::Poll() {
  for (auto& [key, p] : pending_) {
    if (p.done || !group_->Test(p.request)) continue;
    p.done = true;
    (*times_)[p.op].end_ns = clock_.Completion(group_->CompletedNs());
  }
}

void GradReducer::Finish(const schedules::Op& step) {
  if (schedule_.data_parallel <= 1) return;
  const auto it = pending_.find(KeyOf(step));
  SC_CHECK(it != pending_.end(),
           fmt::format("stage {} STEP {}: its REDUCE_GRAD comes first", step.stage, step.version));
  Pending& p = it->second;
  if (!p.done) {
    const schedules::Op reduce = schedules::ReduceGradOf(step);
    NamingTimeout([&] { group_->Wait(p.request); },
                  [&] { return fmt::format("{} (step {})", schedules::ActionString(reduce, schedule_.microbatches),
                                           step.step); });
    (*times_)[p.op].end_ns = clock_.Completion(group_->CompletedNs());
  }
  pending_.erase(it);
}

}  // namespace stagecraft::exec
