// What a selective recompute's module drops of a transformer's kept activations, as the memory
// model counts it (sim/src/transformer_memory.cpp): the one statement `plan` reads to leave out
// the modules that would change nothing.
#pragma once

#include "stagecraft/scenario/recompute.h"
#include "stagecraft/scenario/transformer_spec.h"

namespace stagecraft::sim {

// Whether recomputing `module` drops anything a layer of `t` keeps: core_attn the unfused
// attention's scores (a fused kernel keeps none); the others what the memory model drops of the
// model's dense and MoE layers (layernorm only the LayerNorms kept apart from a GEMM, MLA's and a
// MoE layer's; a module of a part the model lacks, nothing).
bool RecomputeDrops(const TransformerSpec& t, RecomputeModule module);

}  // namespace stagecraft::sim
