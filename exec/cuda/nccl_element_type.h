// Element types (element_type.h) as NCCL datatypes: the one place the mapping is made. NCCL adds
// every one of them in its own type (bf16 since NCCL 2.10), so sums take all five.
#pragma once

#include <nccl.h>

#include <stdexcept>

#include "stagecraft/exec/element_type.h"

namespace stagecraft::exec {

inline ncclDataType_t NcclDataTypeOf(ElementType type) {
  switch (type) {
    case ElementType::kF32: return ncclFloat32;
    case ElementType::kBF16: return ncclBfloat16;
    case ElementType::kF16: return ncclFloat16;
    case ElementType::kI32: return ncclInt32;
    case ElementType::kByte: return ncclUint8;
  }
  throw std::logic_error("an element type out of range");
}

}  // namespace stagecraft::exec
