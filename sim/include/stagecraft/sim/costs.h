// The simulator's cost models for the commands and the executor that use them all: the table
// (cost_models.h), the layer split (layer_split.h), the profile's cost model (profile_costs.h)
// and its file (profile_yaml.h). Code inside sim/ includes the unit it needs.
#pragma once

#include "stagecraft/sim/cost_models.h"
#include "stagecraft/sim/cost_table.h"
#include "stagecraft/sim/layer_split.h"
#include "stagecraft/scenario/profile.h"
#include "stagecraft/sim/profile_costs.h"
#include "stagecraft/scenario/profile_yaml.h"
