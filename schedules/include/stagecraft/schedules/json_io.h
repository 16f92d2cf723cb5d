// The IR as JSON (what `stagecraft schedule --format json` prints and other tools read).
#pragma once

#include <string>
#include <string_view>

#include "stagecraft/base/error.h"
#include "stagecraft/schedules/ir.h"

namespace stagecraft::schedules {

std::string ToJson(const Schedule& schedule);
// Throws InputError "source: what" on malformed input.
Schedule FromJson(std::string_view text, std::string_view source);

}  // namespace stagecraft::schedules
