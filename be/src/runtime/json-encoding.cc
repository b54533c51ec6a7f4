#include "runtime/json-encoding.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>

#include <openssl/evp.h>

#include "runtime/utf8.h"

namespace qr {

namespace {

constexpr char kHex[] = "0123456789abcdef";
constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

/// True for bytes that go into a JSON string unchanged without any further check.
constexpr bool IsPlainAscii(unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

/// The first byte at or after 'p' that is not IsPlainAscii(), 'end' if none. Eight bytes at a
/// time while none of them can be one (a word test that may stop early, never late), then
/// byte by byte: plain text is most of what a result holds.
const unsigned char* SkipPlainAscii(const unsigned char* p, const unsigned char* end) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHigh = 0x8080808080808080ULL;
  // A byte below n (n <= 128) makes this nonzero (Hacker's Delight's "hasless").
  auto has_less = [](uint64_t w, uint64_t n) { return (w - kOnes * n) & ~w & kHigh; };
  while (end - p >= 8) {
    uint64_t w;
    std::memcpy(&w, p, sizeof(w));
    const uint64_t special = (w & kHigh) | has_less(w, 0x20) | has_less(w ^ (kOnes * '"'), 1) |
                             has_less(w ^ (kOnes * '\\'), 1);
    if (special != 0) break;
    p += 8;
  }
  while (p < end && IsPlainAscii(*p)) ++p;
  return p;
}

}  // namespace

void AppendJsonString(std::string_view s, std::string* out) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  out->push_back('"');
  while (p < end) {
    const unsigned char* run = p;
    p = SkipPlainAscii(p, end);
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
      bool valid;
      const size_t n = Utf8CharLength(p, end, &valid);
      if (valid) {
        out->append(reinterpret_cast<const char*>(p), n);
      } else {
        out->append(kReplacement, 3);
      }
      p += n;
    }
  }
  out->push_back('"');
}

size_t JsonStringSize(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  size_t size = s.size() + 2;
  while (p < end) {
    p = SkipPlainAscii(p, end);
    if (p == end) break;
    const unsigned char c = *p;
    if (c == '"' || c == '\\') {
      size += 1;
      ++p;
    } else if (c < 0x20) {
      size += 5;
      ++p;
    } else {
      bool valid;
      const size_t n = Utf8CharLength(p, end, &valid);
      if (!valid) size = size - n + 3;  // one U+FFFD for the whole invalid subsequence
      p += n;
    }
  }
  return size;
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
  const size_t start = out->size();
  out->resize(start + (bytes.size() + 2) / 3 * 4);
  auto* o = reinterpret_cast<unsigned char*>(out->data() + start);
  // EVP_EncodeBlock takes an int length: encode in chunks of a multiple of 3 bytes.
  constexpr size_t kChunk = size_t{3} << 28;
  for (size_t pos = 0; pos < bytes.size(); pos += kChunk) {
    const size_t n = std::min(kChunk, bytes.size() - pos);
    o += EVP_EncodeBlock(o, reinterpret_cast<const unsigned char*>(bytes.data() + pos),
                         static_cast<int>(n));
  }
}

}  // namespace qr
