// The IR as JSON (what `stagecraft schedule --format json` prints and other tools read).
#pragma once

#include <string>
#include <string_view>

#include "stagecraft/base/error.h"
#include "stagecraft/schedules/ir.h"

namespace stagecraft::schedules {

std::string ToJson(const Schedule& schedule);
// Throws InputError "source: what" on malformed input: "x.json: ops[1][2].kind: unknown kind
// 'Q'", or for text that is not JSON "x.json: not valid JSON: WHAT at line L, column C (byte B)".
Schedule FromJson(std::string_view text, std::string_view source);

// A placement as JSON files name it (the schedule's "placement", a trace header's): "loop" or "v".
std::string_view PlacementName(Placement placement);
bool ParsePlacement(std::string_view text, Placement* placement);

}  // namespace stagecraft::schedules
