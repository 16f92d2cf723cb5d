// Element types (element_type.h) as MPI datatypes: the one place the mapping is made. Private to
// exec/src, as mpi.h is.
#pragma once

#include <mpi.h>

#include <stdexcept>
#include <string>

#include "stagecraft/exec/element_type.h"

namespace stagecraft::exec {

// The datatype that moves `type` bit for bit. MPI has no 16-bit float types: bf16 and f16 move
// as MPI_UINT16_T (their bits), which is exact for transfers and gathers.
inline MPI_Datatype MpiTransferType(ElementType type) {
  switch (type) {
    case ElementType::kF32: return MPI_FLOAT;
    case ElementType::kBF16: return MPI_UINT16_T;
    case ElementType::kF16: return MPI_UINT16_T;
    case ElementType::kI32: return MPI_INT32_T;
    case ElementType::kByte: return MPI_UINT8_T;
  }
  throw std::logic_error("an element type out of range");
}

// The datatype that MPI_SUM adds as `type`. Refused for bf16 and f16 with a clear error: MPI's
// predefined sum would add their bits as integers (a silent wrong answer); the cpu backend trains
// in fp32 and the 16-bit sums run over NCCL (nccl_element_type.h), which adds them as floats.
inline MPI_Datatype MpiSumType(ElementType type) {
  if (type == ElementType::kBF16 || type == ElementType::kF16) {
    throw std::invalid_argument("an MPI sum of " + std::string(ElementTypeName(type)) +
                                " elements: MPI has no 16-bit float type, sum fp32 over MPI or " +
                                std::string(ElementTypeName(type)) + " over NCCL");
  }
  return MpiTransferType(type);
}

}  // namespace stagecraft::exec
