// The measured profile's cost model (model.profile; the first row of cost_models.h) for a
// profile held in memory, as `stagecraft profile` calibrates against it.
#pragma once

#include "stagecraft/sim/cost_models.h"
#include "stagecraft/scenario/profile.h"
#include "stagecraft/scenario/scenario.h"

namespace stagecraft::sim {

// A stage costs the sum over its layers (split as layer_split.h says, weighing each layer's
// forward + backward_input + backward_weight + step), with the transformer's `embedding` on the
// first stage and `head` on the last, plus input_copy in the first stage's forward and loss in
// the last's; the last stage's activation_bytes also count the loss gradient it keeps from F to
// its backward (the size of its output: send_bytes, or the logits, send_bytes / hidden · vocab),
// and its F holds that output beside it. workspace_bytes is the largest of its layers' (one layer
// runs at a time). With pipeline.recompute, backward_input also repeats the forward, a stage
// keeps only its input from F to its backward (send_bytes; the tokens, the embedding's
// activation_bytes, on the transformer's first stage), and its layers' activation_bytes are
// rebuilt and held while the backward runs (recompute_bytes), as the executor checkpoints per
// stage.
//
// Calibrated (query.calibrated), with `ranks` (one entry per pipeline rank): each layer's op
// times are scaled by the scales of the rank that held the layer in the calibration runs (their
// `layers`; without them the scenario's split over pipeline.ranks stages), in the query's update
// regime: F by `forward`, a fused B by `backward`, I and W by theirs, STEP and its version copy by
// `step`; input_copy and loss as the first and last layer's forward. The runtime's overhead per
// op, the op-time spread and the p2p fit come with it. Uncalibrated: the layers alone (plus the
// input copy and the loss), as the calibration itself compares against.
CostTable CostsFromProfile(const Scenario& scenario, const Profile& profile, const CostQuery& query);
// The same with the query's fields spelled out.
CostTable CostsFromProfile(const Scenario& scenario, const Profile& profile, const schedules::Shape& shape,
                           bool per_microbatch_updates, bool calibrated);

}  // namespace stagecraft::sim
