#include "stagecraft/exec/step_replay.h"

#include <utility>

#include "stagecraft/base/check.h"

namespace stagecraft::exec {

StepReplay::StepReplay(StepGraphPlan plan, Device& device, const Dataset& data, int microbatches)
    : plan_(std::move(plan)),
      graphs_(plan_.enabled ? device.graphs() : nullptr),
      data_(data),
      device_(device),
      microbatches_(microbatches) {
  if (!on()) return;
  for (int k = plan_.ops_per_step - 1; k >= 0 && last_captured_ < 0; --k) {
    if (plan_.segment_of[static_cast<size_t>(k)] >= 0) last_captured_ = k;
  }
  if (!data_.inputs.empty()) input_window_ = Buffer(device_, microbatches_ * (data_.inputs.size() / data_.microbatches));
  if (!data_.targets.empty()) {
    target_window_ = Buffer(device_, microbatches_ * (data_.targets.size() / data_.microbatches));
  }
  captured_.resize(static_cast<size_t>(plan_.segments));
  captured_grads_.resize(static_cast<size_t>(plan_.ops_per_step));
}

StepReplay::~StepReplay() {
  if (!on()) return;
  graphs_->AbandonCapture();
  try {
    graphs_->Release();
  } catch (...) {  // a destructor must not throw; the run's own error is the one reported
  }
}

StepReplay::Place StepReplay::PlaceOf(int i) const {
  const int k = i % plan_.ops_per_step;
  const auto segment_at = [&](int at) {
    return at < 0 || at >= plan_.ops_per_step ? -1 : plan_.segment_of[static_cast<size_t>(at)];
  };
  const int segment = segment_at(k);
  return Place{.offset = k,
               .segment = segment,
               .first = segment >= 0 && segment_at(k - 1) != segment,
               .last = segment >= 0 && segment_at(k + 1) != segment};
}

const float* StepReplay::InputOf(int microbatch) const {
  return input_window_.data() + microbatch * (input_window_.size() / microbatches_);
}

const float* StepReplay::TargetsOf(int microbatch) const {
  return target_window_.data() + microbatch * (target_window_.size() / microbatches_);
}

void StepReplay::FillWindows(int step) {
  for (const WindowCopy& c : WindowCopies(step * microbatches_, microbatches_, data_.microbatches)) {
    const auto copy = [&](Buffer& window, const Buffer& from) {
      if (window.empty()) return;
      const int64_t n = window.size() / microbatches_;
      device_.memory().Copy(window.data() + c.to * n, from.data() + c.from * n, c.count * n);
    };
    copy(input_window_, data_.inputs);
    copy(target_window_, data_.targets);
  }
}

void StepReplay::BeginCapture(int segment) {
  graphs_->BeginCapture();
  capturing_ = segment;
}

void StepReplay::EndCapture(int segment) {
  capturing_ = -1;
  SC_CHECK(graphs_->EndCapture() == segment, "segments are captured in order");
  graphs_->Launch(segment, 0);
}

void StepReplay::AbandonCapture() noexcept {
  capturing_ = -1;
  graphs_->AbandonCapture();
}

void StepReplay::Captured(int i, int begin, int end, bool end_elsewhere) {
  if (capturing_ < 0) return;
  captured_[static_cast<size_t>(capturing_)].push_back({i % plan_.ops_per_step, begin, end, end_elsewhere});
}

void StepReplay::CapturedGrads(int i, const GradTarget& grads) {
  if (capturing_ >= 0) captured_grads_[static_cast<size_t>(i % plan_.ops_per_step)] = grads;
}

int StepReplay::InstanceOf(int step) const { return (step - plan_.capture_step) % DeviceGraphs::kInstances; }

void StepReplay::Launch(int segment, int step) { graphs_->Launch(segment, InstanceOf(step)); }

void StepReplay::TimeLaunch(int segment, int step, int step_base, OpClock& clock) const {
  const int instance = InstanceOf(step);
  for (const CapturedOp& c : captured_[static_cast<size_t>(segment)]) {
    clock.Replayed(step_base + c.offset, DeviceGraphs::StampIn(c.begin, instance),
                   DeviceGraphs::StampIn(c.end, instance), c.end_elsewhere);
  }
}

bool StepReplay::SameGrads(int i, const GradTarget& grads) const {
  const GradTarget& want = captured_grads_[static_cast<size_t>(i % plan_.ops_per_step)];
  return grads.data == want.data && grads.accumulate == want.accumulate;
}

void StepReplay::Release() {
  if (on()) graphs_->Release();
}

}  // namespace stagecraft::exec
