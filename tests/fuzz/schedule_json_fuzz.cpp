// Fuzz harness: the schedule IR as JSON (`stagecraft schedule --format json`), read by FromJson
// and validated. Whatever FromJson accepts must come back unchanged through ToJson.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fuzz_input.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/json_io.h"
#include "stagecraft/schedules/validate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stagecraft::schedules;
  try {
    const Schedule s = FromJson(stagecraft::fuzz::AsText(data, size), "fuzz.json");
    if (!(FromJson(ToJson(s), "written.json") == s)) {
      std::fprintf(stderr, "schedule_json_fuzz: a schedule changed through ToJson and FromJson\n");
      std::abort();
    }
    Validate(s);
  } catch (const stagecraft::InputError&) {
    // Bad input, reported as it should be; anything else escapes to the fuzzer.
  }
  return 0;
}
