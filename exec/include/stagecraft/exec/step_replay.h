// StepReplay: the runtime's (runtime.cpp) part of step graphs (step_graphs.h) that holds state:
// the windows the captured passes read their step's inputs and targets from, each segment's
// passes with the stamps they took in the capture, and the gradient buffer each pass added into
// there. The runtime decides when to capture and launch; this keeps the books.
#pragma once

#include <vector>

#include "stagecraft/exec/device.h"
#include "stagecraft/exec/device_graphs.h"
#include "stagecraft/exec/op_clock.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/exec/stage.h"
#include "stagecraft/exec/step_graphs.h"

namespace stagecraft::exec {

class StepReplay {
 public:
  // Off (on() false, nothing allocated) unless `plan` is enabled.
  StepReplay(StepGraphPlan plan, Device& device, const Dataset& data, int microbatches);
  // The graphs go with the run; an open capture is abandoned; never throws.
  ~StepReplay();
  StepReplay(const StepReplay&) = delete;
  StepReplay& operator=(const StepReplay&) = delete;

  bool on() const { return graphs_ != nullptr; }
  const StepGraphPlan& plan() const { return plan_; }

  // Op i of the rank's list as the plan has it: its offset in its step, its segment (-1: issued
  // eagerly) and whether it opens or closes that segment.
  struct Place {
    int offset = 0;
    int segment = -1;
    bool first = false;
    bool last = false;
  };
  Place PlaceOf(int i) const;
  // Whether op i is its step's last captured pass.
  bool LastCapturedOf(int i) const { return on() && i % plan_.ops_per_step == last_captured_; }

  // Whether ops of `step` read their microbatch through the windows, and where microbatch
  // `microbatch` of the step lies in them.
  bool Windowed(int step) const { return on() && step >= plan_.capture_step; }
  const float* InputOf(int microbatch) const;
  const float* TargetsOf(int microbatch) const;
  // The step's microbatches of the dataset into the windows.
  void FillWindows(int step);

  // Capture of segment `segment` (in order), closed by EndCapture, which launches it once.
  void BeginCapture(int segment);
  void EndCapture(int segment);
  void AbandonCapture() noexcept;
  bool capturing() const { return capturing_ >= 0; }
  // While capturing: op i took stamps `begin` and `end` (`end_elsewhere`: a transfer recorded
  // into the capture, Mailbox::Post's stamps, its end on a stream of the transport's); pass i
  // adds into `grads`.
  void Captured(int i, int begin, int end, bool end_elsewhere = false);
  void CapturedGrads(int i, const GradTarget& grads);

  // Launches segment `segment` for `step`; then TimeLaunch gives the clock the stamps its passes
  // take in that launch (the first op of the step being op `step_base` of the list). Apart, so
  // that a read-back of the step before, made between them, does not wait for this launch.
  void Launch(int segment, int step);
  void TimeLaunch(int segment, int step, int step_base, OpClock& clock) const;
  // Whether pass i adds into the gradient buffer its capture did.
  bool SameGrads(int i, const GradTarget& grads) const;
  // Drops the graphs (after the device drained them); nothing more may be launched.
  void Release();

 private:
  struct CapturedOp {
    int offset = 0;  // in the step
    int begin = 0;
    int end = 0;
    bool end_elsewhere = false;  // a transfer's end, stamped on the transport's stream
  };
  int InstanceOf(int step) const;  // the instance a replayed step launches

  const StepGraphPlan plan_;
  DeviceGraphs* const graphs_;  // null unless the plan is enabled
  const Dataset& data_;
  Device& device_;
  const int64_t microbatches_;
  int last_captured_ = -1;
  Buffer input_window_;
  Buffer target_window_;
  std::vector<std::vector<CapturedOp>> captured_;  // by segment
  std::vector<GradTarget> captured_grads_;          // by offset in the step
  int capturing_ = -1;
};

}  // namespace stagecraft::exec
