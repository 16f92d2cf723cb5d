// RapidJSON as every file of this library includes it: its assertions (a key where a value
// belongs, a value read as the wrong type) are bugs in stagecraft, so they are SC_CHECKs.
#pragma once

#include "stagecraft/base/check.h"

#ifndef RAPIDJSON_ASSERT
#define RAPIDJSON_ASSERT(x) SC_CHECK(x, "RapidJSON: " #x)
#endif
#include <rapidjson/document.h>
#include <rapidjson/writer.h>
