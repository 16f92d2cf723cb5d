// UTF-8 well-formedness by Unicode Table 3-7 (no overlong forms, no surrogates, nothing past
// U+10FFFF), shared by the trace reader, which rejects ill-formed text, and the JSON writer,
// which replaces it so that every file it writes parses.
#pragma once

namespace stagecraft::schedules {

// The length (1-4) of the well-formed sequence at `p`, or minus the length of its maximal
// ill-formed prefix (Unicode §3.9 "maximal subpart", which one U+FFFD replaces). p < end.
inline int Utf8Sequence(const char* p, const char* end) {
  const auto c = static_cast<unsigned char>(*p);
  if (c < 0x80) return 1;
  int len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    lo = c == 0xE0 ? 0xA0 : 0x80;
    hi = c == 0xED ? 0x9F : 0xBF;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    lo = c == 0xF0 ? 0x90 : 0x80;
    hi = c == 0xF4 ? 0x8F : 0xBF;
  } else {
    return -1;
  }
  for (int k = 1; k < len; ++k) {
    if (p + k == end) return -k;
    const auto b = static_cast<unsigned char>(p[k]);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return -k;
  }
  return len;
}

}  // namespace stagecraft::schedules
