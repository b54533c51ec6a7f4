// ParseId on arbitrary bytes: never crashes, accepts exactly "<16 hex>:<16 hex>" (either case),
// round-trips through PrintId, and leaves its output alone on an error whose message quotes a
// bounded amount of the input.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz-util.h"
#include "util/unique-id.h"

namespace {

bool IsHexDigit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/// The specification, written independently of the implementation.
bool IsWellFormedId(std::string_view s) {
  if (s.size() != 33 || s[16] != ':') return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i != 16 && !IsHexDigit(s[i])) return false;
  }
  return true;
}

std::string Lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const qr::UniqueId sentinel{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  qr::UniqueId id = sentinel;
  const qr::Status s = qr::ParseId(input, &id);
  FUZZ_CHECK(s.ok() == IsWellFormedId(input), "ParseId disagrees with the id grammar", input);
  if (s.ok()) {
    const std::string printed = qr::PrintId(id);
    FUZZ_CHECK(printed == Lowercase(input), "PrintId(ParseId(s)) != lowercase(s)", input);
    char buf[33];
    qr::PrintId(id, buf);
    FUZZ_CHECK(std::string_view(buf, 33) == printed, "the two PrintId overloads differ");
  } else {
    FUZZ_CHECK(id == sentinel, "ParseId wrote its output on an error", input);
    FUZZ_CHECK(!s.message().empty(), "empty error message", input);
    // The input is quoted truncated: a huge id never makes a huge error message.
    FUZZ_CHECK(s.message().size() < 512, "unbounded error message", s.message());
    for (unsigned char c : s.message()) {
      FUZZ_CHECK(c >= 0x20 && c < 0x7f, "unescaped byte in the error message", s.message());
    }
  }
  return 0;
}
