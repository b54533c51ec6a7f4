#pragma once

#include <cstddef>
#include <string_view>

/// The one UTF-8 walker: steps over one character at a time, telling well-formed sequences
/// (Unicode 15, table 3-7) from ill-formed ones. The JSON encoder replaces each ill-formed
/// step with one U+FFFD; the /queries page truncates statements by these steps.
/// Thread-safety: pure functions.

namespace qr {

/// Bytes of the character starting at 'p' (p < end): the length of the well-formed sequence
/// there (1 for ASCII) with '*valid' set, else the length of its maximal ill-formed subpart
/// (at least 1: a stray continuation byte, an overlong form, a surrogate, a code point above
/// U+10FFFF, a sequence cut short), as the Unicode standard's substitution of maximal subparts
/// counts them, with '*valid' cleared.
inline size_t Utf8CharLength(const unsigned char* p, const unsigned char* end, bool* valid) {
  const unsigned char c = p[0];
  *valid = false;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c < 0x80) {
    *valid = true;
    return 1;
  } else if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 1;
  }
  for (size_t i = 1; i < n; ++i) {
    const unsigned char min = i == 1 ? lo : 0x80, max = i == 1 ? hi : 0xBF;
    if (p + i >= end || p[i] < min || p[i] > max) return i;
  }
  *valid = true;
  return n;
}

/// Utf8CharLength() of the character at s[i] (i < s.size()).
inline size_t Utf8CharLength(std::string_view s, size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  bool valid;
  return Utf8CharLength(p + i, p + s.size(), &valid);
}

}  // namespace qr
