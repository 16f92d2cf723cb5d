// The element type of every transfer and collective (transport.h, replica_group.h,
// all_to_all.h): its size and name here; its MPI datatype in exec/src/mpi_element_type.h and its
// NCCL datatype in exec/cuda/nccl_element_type.h, one place each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace stagecraft::exec {

enum class ElementType {
  kF32,   // IEEE binary32
  kBF16,  // bfloat16 (the upper half of a binary32)
  kF16,   // IEEE binary16
  kI32,   // two's-complement 32-bit integer
  kByte,  // an unsigned byte: opaque data (sums wrap modulo 256)
};
inline constexpr int kElementTypes = 5;

constexpr int64_t ElementBytes(ElementType type) {
  switch (type) {
    case ElementType::kF32: return 4;
    case ElementType::kBF16: return 2;
    case ElementType::kF16: return 2;
    case ElementType::kI32: return 4;
    case ElementType::kByte: return 1;
  }
  return 0;
}

constexpr std::string_view ElementTypeName(ElementType type) {
  switch (type) {
    case ElementType::kF32: return "f32";
    case ElementType::kBF16: return "bf16";
    case ElementType::kF16: return "f16";
    case ElementType::kI32: return "i32";
    case ElementType::kByte: return "byte";
  }
  return "?";
}

// "`count` floats" for fp32 (what every message of a run's tensors has always said), else
// "`count` <type> elements": the messages of waits that time out.
inline std::string ElementCountText(int64_t count, ElementType type) {
  if (type == ElementType::kF32) return std::to_string(count) + " floats";
  return std::to_string(count) + " " + std::string(ElementTypeName(type)) + " elements";
}

// The element type of a C++ type that has exactly one (16-bit floats have no C++20 type here:
// their callers name kBF16 or kF16).
template <class T>
struct ElementTypeOf;
template <>
struct ElementTypeOf<float> {
  static constexpr ElementType value = ElementType::kF32;
};
template <>
struct ElementTypeOf<int32_t> {
  static constexpr ElementType value = ElementType::kI32;
};
template <>
struct ElementTypeOf<std::byte> {
  static constexpr ElementType value = ElementType::kByte;
};
template <>
struct ElementTypeOf<uint8_t> {
  static constexpr ElementType value = ElementType::kByte;
};

}  // namespace stagecraft::exec
