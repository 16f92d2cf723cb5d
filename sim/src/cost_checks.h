// Checked conversions of derived costs (limits.h): a time or size that a cost model computes in
// double becomes an int64 only within its limit; past it, one InputError names the op, the
// value, the keys it came from and the limit. Internal to sim/src.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "stagecraft/sim/cost_table.h"

namespace stagecraft::sim::detail {

// What a derived value is: "a forward" of stage 3, "the weights" of stage 0.
struct Derived {
  std::string_view what;
  int stage = 0;
};

// Where a stage's values came from, e.g. "model.mlp: 4 layers of hidden 512, microbatch 64, on
// topology.device: peak 1e+06 FLOPS x efficiency 1"; called only to word an error.
using KeysOf = std::function<std::string(int stage)>;

// In each, `path` is the scenario's file ("" for one built in code), which opens the message.

// `ns` rounded to the nearest nanosecond. Throws InputError "SCENARIO: a forward of stage 0
// would take 9.2e+06 s (KEYS), above the limit of 1 h per op" past kMaxOpNs (or when not finite).
int64_t CheckedOpNs(double ns, std::string_view path, Derived derived, const KeysOf& keys);

// `bytes` rounded to the nearest byte; throws InputError "... would need 2.3e+18 bytes (KEYS),
// above the limit of 1 PiB per value" past kMaxValueBytes.
int64_t CheckedBytes(double bytes, std::string_view path, Derived derived, const KeysOf& keys);

// The two conversions for the values of one stage, as a cost model fills its StageCost.
class StageChecks {
 public:
  StageChecks(std::string_view path, int stage, const KeysOf& keys) : path_(path), stage_(stage), keys_(keys) {}
  int64_t Ns(double ns, std::string_view what) const { return CheckedOpNs(ns, path_, {what, stage_}, keys_); }
  int64_t Bytes(double bytes, std::string_view what) const { return CheckedBytes(bytes, path_, {what, stage_}, keys_); }

 private:
  std::string_view path_;
  int stage_;
  const KeysOf& keys_;
};

// `ns` in seconds with the fewest significant digits (two at least) that tell it from `limit_ns`
// printed alike: "9.2e+06", "3600.2" (not "3.6e+03" for a value just past an hour).
std::string SecondsAbove(double ns, double limit_ns);

// "1 layer", "4 layers".
std::string Count(int64_t n, std::string_view noun);

// The ops a stage composes from its fields, each within kMaxOpNs: a full backward (fused, or
// backward_input + backward_weight) and a STEP that copies its old version first.
void CheckComposedOps(const CostTable& table, std::string_view path, const KeysOf& keys);

}  // namespace stagecraft::sim::detail
