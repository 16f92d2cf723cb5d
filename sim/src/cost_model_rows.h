// The rows of the cost-model table (cost_models.cpp), each defined in its own file. Internal to
// sim/src.
#pragma once

#include "stagecraft/sim/cost_models.h"

namespace stagecraft::sim::detail {

CostModel ProfileCostModel();      // profile_costs.cpp
CostModel ExplicitCostModel();     // explicit_costs.cpp
CostModel RooflineCostModel();     // roofline_costs.cpp
CostModel TransformerCostModel();  // transformer_costs.cpp
CostModel MlpCostModel();          // mlp_costs.cpp

}  // namespace stagecraft::sim::detail
