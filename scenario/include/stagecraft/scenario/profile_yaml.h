// The profile file (model.profile, written by `stagecraft profile`; the types are in profile.h):
// read with every value checked against its range (limits.h), written back with exact integers.
// Whether a profile fits a scenario is Validate's to say (validate.h).
//
//   device: cpu-core            # informational: where it was measured
//   microbatch_size: 32         # must equal pipeline.microbatch_size
//   send_bytes: 32KiB           # activation sent between stages per microbatch
//   layers:                     # one entry per layer, in model order
//     - {forward: 1.2ms, backward_input: 1.1ms, backward_weight: 1.0ms,
//        activation_bytes: 64KiB, weight_bytes: 256KiB}
//       # optional per layer: step (optimizer update time, default 0), copy (a weight version's
//       #   copy), w_stash_bytes (default 0), grad_bytes (default weight_bytes),
//       #   optimizer_bytes (default 0), workspace_bytes (default 0)
//   embedding: {...}            # the transformer's embeddings and head, measured like a layer
//   head: {...}
//
//   # optional, measured by `stagecraft profile` beyond the layers (the calibration):
//   input_copy: 9us             # first stage, per F: copying its input microbatch
//   loss: 12us                  # last stage, per F: the loss and its gradient
//   op_overhead: 4us            # runtime work per op of a rank's list
//   op_time_cv: 0.06            # how much an op's time varies from run to run (its CV)
//   p2p: {latency: 3us, bandwidth: 5.5GB/s, overlap: 0.3,   # ping-pong fit (P2pFit)
//         in_pipeline_bandwidth: 2.9GB/s}                   # optional: as the pipeline saw it
//   allreduce: {latency: 20us, bus_bandwidth: 2.4GB/s, ranks: 2}   # all-reduce fit (CollectiveFit)
//   ranks:                      # per rank of the calibration runs: in-pipeline / isolated time
//     - layers: 4               # the layers it held (the split of the calibration runs)
//       op_overhead: 5us        # optional: its own runtime work per op (else op_overhead)
//       per_step: {forward: 1.02, backward: 1.04, backward_input: 1.0, backward_weight: 1.03, step: 1.1}
//       per_microbatch: {forward: 1.05, backward: 1.15, step: 1.2}   # keys default to per_step's
//       stash: {deep: 8, forward: {at: 0.9, slope: 0.02}, backward: {at: 1.9, slope: 0.04}}  # fits.h
#pragma once

#include <string>
#include <string_view>

#include "stagecraft/base/error.h"
#include "stagecraft/scenario/profile.h"

namespace stagecraft::sim {

// Reads a profile; errors are InputError "path:line:col: ..." ("path: cannot read: ..." for a
// file that cannot be read, at most kMaxYamlBytes).
Profile LoadProfile(const std::string& path);
// The same from the file's text, `source` naming it in errors.
Profile ProfileFromYaml(std::string_view text, const std::string& source);
// The profile as YAML text in the format above (exact integers: durations in ns, sizes in B).
std::string ProfileToYaml(const Profile& profile);

}  // namespace stagecraft::sim
