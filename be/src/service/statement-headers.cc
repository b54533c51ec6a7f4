// What a statement request's headers say: the protocol headers (X-Trino-*, X-Presto-*), the
// session properties and prepared statements, the user, durations (maxWait) and the Host
// echoed into URIs. Declared in statement-service.h.

#include <charconv>
#include <iterator>
#include <cmath>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/beast/core/string.hpp>

#include "http/basic-credentials.h"
#include "http/http-message.h"
#include "service/statement-service.h"
#include "util/status.h"

namespace qr {

std::string ProtocolHeader(const HttpRequest& req, const std::string& suffix) {
  std::string_view v = req.Header("X-Trino-" + suffix);
  if (v.empty()) v = req.Header("X-Presto-" + suffix);
  return std::string(v);
}

bool UsesPrestoHeaders(const HttpRequest& req) {
  const boost::beast::string_view trino = "x-trino-", presto_prefix = "x-presto-";
  bool presto = false;
  for (const auto& field : req.headers) {
    const boost::beast::string_view name = field.name_string();
    if (boost::beast::iequals(name.substr(0, trino.size()), trino)) return false;
    if (boost::beast::iequals(name.substr(0, presto_prefix.size()), presto_prefix)) presto = true;
  }
  return presto;
}

std::vector<std::string> SplitClientTags(std::string_view v) {
  std::vector<std::string> tags;
  while (!v.empty()) {
    const size_t comma = v.find(',');
    std::string_view tag = v.substr(0, comma);
    while (!tag.empty() && (tag.front() == ' ' || tag.front() == '\t')) tag.remove_prefix(1);
    while (!tag.empty() && (tag.back() == ' ' || tag.back() == '\t')) tag.remove_suffix(1);
    if (!tag.empty()) tags.emplace_back(tag);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return tags;
}

namespace {

/// Whether every '%' of 's' starts an escape of two hex digits (Java's URLDecoder, which
/// Trino decodes these headers with, refuses anything else).
bool WellEscaped(std::string_view s) {
  auto hex = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  };
  for (size_t i = s.find('%'); i != std::string_view::npos; i = s.find('%', i + 3)) {
    if (i + 2 >= s.size() || !hex(s[i + 1]) || !hex(s[i + 2])) return false;
  }
  return true;
}

/// Appends the "name=value" items of every 'trino_name' and 'presto_name' header of 'req' to
/// 'out'. Values are URL-decoded as Trino decodes them (Java's URLDecoder: '+' is a space,
/// which is how the JDBC driver's URLEncoder sends one); with 'decode_names' names too
/// (X-Trino-Prepared-Statement's), else they are taken as sent (X-Trino-Session's). Empty
/// items are skipped. Returns the 400's text ("" when every item parses): an item without
/// '=' or with a malformed escape (Trino refuses both), or more than 'max' items.
std::string ParseItemHeaders(const HttpRequest& req, const char* trino_name,
                             const char* presto_name, bool decode_names, size_t max,
                             std::vector<std::pair<std::string, std::string>>* out) {
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  for (const char* name : {trino_name, presto_name}) {
    for (const auto& field : req.headers) {
      if (!boost::beast::iequals(field.name_string(), name)) continue;
      std::string_view v(field.value().data(), field.value().size());
      while (!v.empty()) {
        const size_t comma = v.find(',');
        const std::string_view item = trim(v.substr(0, comma));
        if (!item.empty()) {
          const size_t eq = item.find('=');
          if (eq == std::string_view::npos || !WellEscaped(item)) {
            return "Invalid " + std::string(name) + " header: " + QuoteForError(item, 80) +
                   (eq == std::string_view::npos
                        ? " is not name=value"
                        : " has a '%' that is not followed by two hex digits");
          }
          if (out->size() >= max) {
            return "Too many items in " + std::string(name) + ": at most " +
                   std::to_string(max) + " are accepted per query (--max_session_properties)";
          }
          const std::string_view key = trim(item.substr(0, eq));
          out->emplace_back(decode_names ? PercentDecode(key, true) : std::string(key),
                            PercentDecode(trim(item.substr(eq + 1)), true));
        }
        if (comma == std::string_view::npos) break;
        v.remove_prefix(comma + 1);
      }
    }
  }
  return "";
}

}  // namespace

std::string ParseSessionHeaders(const HttpRequest& req, SessionInfo* session,
                                size_t max_properties) {
  return ParseItemHeaders(req, "X-Trino-Session", "X-Presto-Session", false, max_properties,
                          &session->properties);
}

std::string ParsePreparedStatementHeaders(const HttpRequest& req, SessionInfo* session,
                                          size_t max_statements) {
  return ParseItemHeaders(req, "X-Trino-Prepared-Statement", "X-Presto-Prepared-Statement",
                          true, max_statements, &session->prepared_statements);
}

std::vector<std::string> ClientTags(const HttpRequest& req) {
  // Every line of the header, as Trino reads them (the Trino family's, else the Presto one's).
  std::vector<std::string> tags;
  for (const char* name : {"X-Trino-Client-Tags", "X-Presto-Client-Tags"}) {
    for (const auto& field : req.headers) {
      if (!boost::beast::iequals(field.name_string(), name)) continue;
      std::vector<std::string> more =
          SplitClientTags(std::string_view(field.value().data(), field.value().size()));
      tags.insert(tags.end(), std::make_move_iterator(more.begin()),
                  std::make_move_iterator(more.end()));
    }
    if (!tags.empty()) break;
  }
  return tags;
}

std::string RequestUser(const HttpRequest& req) {
  std::string user = ProtocolHeader(req, "User");
  if (!user.empty()) return user;
  BasicCredentials credentials;
  if (!ParseBasicCredentials(req.Header("Authorization"), &credentials)) return "";
  return std::string(credentials.user());
}

bool IsSafeAuthority(std::string_view host) {
  if (host.empty() || host.size() > 255) return false;
  for (char c : host) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == ':' || c == '[' || c == ']' || c == '_';
    if (!ok) return false;
  }
  return true;
}

bool ParseDuration(std::string_view s, std::chrono::milliseconds* out) {
  // Airlift's Duration, which Trino parses these with: \s*(\d+(\.\d+)?)\s*([a-zA-Z]+)\s*
  auto is_space = [](char c) { return c == ' ' || c == '\t'; };
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  size_t number_end = digits;
  if (digits > 0 && number_end + 1 < s.size() && s[number_end] == '.' &&
      s[number_end + 1] >= '0' && s[number_end + 1] <= '9') {
    ++number_end;
    while (number_end < s.size() && s[number_end] >= '0' && s[number_end] <= '9') ++number_end;
  }
  if (digits == 0) return false;
  double value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + number_end, value);
  if (ec != std::errc() || ptr != s.data() + number_end || !std::isfinite(value)) return false;
  std::string_view unit = s.substr(number_end);
  while (!unit.empty() && is_space(unit.front())) unit.remove_prefix(1);
  double ms;
  if (unit == "ns") ms = value / 1e6;
  else if (unit == "us") ms = value / 1e3;
  else if (unit == "ms") ms = value;
  else if (unit == "s") ms = value * 1e3;
  else if (unit == "m") ms = value * 60e3;
  else if (unit == "h") ms = value * 3600e3;
  else if (unit == "d") ms = value * 86400e3;
  else return false;
  if (ms > 1e12) return false;
  *out = std::chrono::milliseconds(static_cast<int64_t>(ms));
  return true;
}

}  // namespace qr
