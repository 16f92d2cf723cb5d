// Copies of a stage-microbatch's saved activations between the device tier and the host tier
// (OFFLOAD / RELOAD of activations, DESIGN.md §10), each on its copy stream: an offload runs after
// the compute that made the activations, a reload after the offloads queued before it, and the
// compute op that reads a reload waits for it on the device (Wait), not on the host. The device
// buffers an offload read, and the host buffers a reload read, are freed only once their copy is
// done (Release polls for it without waiting), so no later work reuses memory a copy still reads.
#pragma once

#include <cstddef>
#include <unordered_map>
#include <vector>

#include "stagecraft/exec/device.h"
#include "stagecraft/exec/op_clock.h"
#include "stagecraft/exec/stage.h"

namespace stagecraft::exec {

class ActivationCopies {
 public:
  explicit ActivationCopies(Device& device) : device_(device) {}

  // OFFLOAD of `unit`, op `op` of the rank's list: every buffer of `saved` to host-tier buffers
  // kept here, timed on the to-host stream by `clock`; `saved` is left empty (its device buffers
  // go once the copy is done).
  void Offload(size_t unit, Activations* saved, OpClock& clock, int op);
  // RELOAD of `unit`: its host copy back into device buffers, timed on the to-device stream,
  // returned in the shape `Offload` took them. Throws std::logic_error (SC_CHECK) for a unit not
  // offloaded.
  Activations Reload(size_t unit, OpClock& clock, int op);
  // Before a compute op that reads a reloaded unit: the compute stream waits for the reloads
  // queued so far.
  void Wait();
  // Frees the buffers of the copies the device has finished; `all`: waits for every copy first.
  void Release(bool all = false);
  // Nothing offloaded and not reloaded, nothing waiting to be freed.
  bool empty() const { return host_.empty() && leaving_.empty() && arriving_.empty(); }

 private:
  Device& device_;
  std::unordered_map<size_t, Activations> host_;  // by unit: offloaded, in host-tier buffers
  std::vector<Activations> leaving_;              // device buffers an offload still reads
  std::vector<Activations> arriving_;             // host buffers a reload still reads
};

}  // namespace stagecraft::exec
