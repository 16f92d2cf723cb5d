// The names of the scenario's enumerations as YAML spells them: one table per enumeration, read
// by the loader (a value outside the table is an error naming every entry) and printed by anyone
// who reports a value.
#pragma once

#include <cstddef>
#include <string_view>

namespace stagecraft::sim {

template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

// The name of `value` in `table` ("?" for a value the table lacks, which a complete table never has).
template <class E, size_t N>
constexpr std::string_view NameIn(const EnumName<E> (&table)[N], E value) {
  for (const EnumName<E>& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return "?";
}

}  // namespace stagecraft::sim
