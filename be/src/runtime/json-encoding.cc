#include "runtime/json-encoding.h"

#include <charconv>
#include <cmath>
#include <cstring>

namespace qr {

namespace {

constexpr char kHex[] = "0123456789abcdef";
constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

/// True for bytes that go into a JSON string unchanged without any further check.
constexpr bool IsPlainAscii(unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

/// Length of the valid UTF-8 sequence starting at 'p' (a non-ASCII byte), or 0 when invalid;
/// then '*invalid_len' is the length of the maximal invalid subpart (at least 1).
size_t ValidUtf8Length(const unsigned char* p, const unsigned char* end, size_t* invalid_len) {
  const unsigned char c = p[0];
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
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
    *invalid_len = 1;
    return 0;
  }
  for (size_t i = 1; i < n; ++i) {
    const unsigned char min = i == 1 ? lo : 0x80, max = i == 1 ? hi : 0xBF;
    if (p + i >= end || p[i] < min || p[i] > max) {
      *invalid_len = i;
      return 0;
    }
  }
  return n;
}

}  // namespace

void AppendJsonString(std::string_view s, std::string* out) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  out->push_back('"');
  while (p < end) {
    const unsigned char* run = p;
    while (p < end && IsPlainAscii(*p)) ++p;
    out->append(reinterpret_cast<const char*>(run), p - run);
    if (p == end) break;
    const unsigned char c = *p;
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
      ++p;
    } else if (c < 0x20) {
      const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
      out->append(esc, sizeof(esc));
      ++p;
    } else {
      size_t invalid_len = 0;
      const size_t n = ValidUtf8Length(p, end, &invalid_len);
      if (n > 0) {
        out->append(reinterpret_cast<const char*>(p), n);
        p += n;
      } else {
        out->append(kReplacement, 3);
        p += invalid_len;
      }
    }
  }
  out->push_back('"');
}

void AppendJsonInt(int64_t v, std::string* out) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, r.ptr - buf);
}

void AppendJsonDouble(double v, std::string* out) {
  if (std::isnan(v)) {
    out->append("\"NaN\"");
    return;
  }
  if (std::isinf(v)) {
    out->append(v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    return;
  }
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  const size_t len = r.ptr - buf;
  out->append(buf, len);
  // Shortest form of an integral value has neither: "3" would decode as an integer.
  if (std::memchr(buf, '.', len) == nullptr && std::memchr(buf, 'e', len) == nullptr) {
    out->append(".0");
  }
}

void AppendBase64(std::string_view bytes, std::string* out) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t n = bytes.size();
  const size_t start = out->size();
  out->resize(start + (n + 2) / 3 * 4);
  char* o = out->data() + start;
  for (; n >= 3; n -= 3, p += 3) {
    const uint32_t v = (uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | p[2];
    *o++ = kAlphabet[v >> 18];
    *o++ = kAlphabet[(v >> 12) & 63];
    *o++ = kAlphabet[(v >> 6) & 63];
    *o++ = kAlphabet[v & 63];
  }
  if (n > 0) {
    const uint32_t v = (uint32_t{p[0]} << 16) | (n == 2 ? uint32_t{p[1]} << 8 : 0);
    *o++ = kAlphabet[v >> 18];
    *o++ = kAlphabet[(v >> 12) & 63];
    *o++ = n == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    *o++ = '=';
  }
}

}  // namespace qr
