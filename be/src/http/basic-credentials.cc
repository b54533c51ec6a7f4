#include "http/basic-credentials.h"

#include <absl/strings/match.h>

#include "http/base64.h"

namespace qr {
namespace {

bool IsOws(char c) { return c == ' ' || c == '\t'; }

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && IsOws(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsOws(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

bool ParseBasicCredentials(std::string_view authorization, BasicCredentials* out) {
  out->decoded.clear();
  out->colon = 0;
  constexpr absl::string_view kScheme = "Basic";
  std::string_view v = TrimOws(authorization);
  if (!absl::StartsWithIgnoreCase(absl::string_view(v.data(), v.size()), kScheme)) return false;
  v.remove_prefix(kScheme.size());
  if (v.empty() || v.front() != ' ') return false;
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  if (!Base64Decode(v, &out->decoded)) return false;
  const size_t colon = out->decoded.find(':');
  if (colon == std::string::npos || colon == 0) {
    out->decoded.clear();
    return false;
  }
  out->colon = colon;
  return true;
}

}  // namespace qr
