#pragma once

#include <stdio.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

/// Helpers shared by the libFuzzer targets: a failed property aborts with a message (libFuzzer
/// then saves the input as a crash), and the targets that need the sample database share one
/// data directory.

namespace qr::fuzz {

/// Prints 'what' (and the offending text, escaped and truncated) and aborts.
[[noreturn]] inline void Fail(const char* file, int line, const std::string& what,
                              std::string_view text = {}) {
  std::string shown;
  for (unsigned char c : text.substr(0, 2000)) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      shown.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\x%02x", c);
      shown += buf;
    }
  }
  fprintf(stderr, "\n*** fuzz property violated at %s:%d: %s\n", file, line, what.c_str());
  if (!text.empty()) fprintf(stderr, "*** text (%zu bytes): \"%s\"\n", text.size(), shown.c_str());
  fflush(stderr);
  abort();
}

/// Checks a property of the code under test (not an assert: active in every build).
#define FUZZ_CHECK(cond, ...)                                                   \
  do {                                                                          \
    if (!(cond)) ::qr::fuzz::Fail(__FILE__, __LINE__, "CHECK(" #cond ") " __VA_ARGS__); \
  } while (0)

/// A directory for the sample database: $QR_FUZZ_DATA_DIR (scripts/fuzz.sh sets it so that
/// every run reuses one database), else a fresh temporary directory removed at exit.
inline std::string DataDir() {
  if (const char* dir = getenv("QR_FUZZ_DATA_DIR"); dir != nullptr && *dir != '\0') return dir;
  static std::string tmp = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "qr-fuzz.XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) Fail(__FILE__, __LINE__, "mkdtemp failed: " + tmpl);
    return tmpl;
  }();
  static const int registered = atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);
  });
  (void)registered;
  return tmp;
}

/// The scale factor of the fuzzers' sample database: a few hundred rows, enough for joins
/// and aggregates to return something while keeping every query fast.
inline constexpr double kSampleScale = 0.0005;

}  // namespace qr::fuzz
