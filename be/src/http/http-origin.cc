#include "http/http-origin.h"

#include <boost/beast/core/string.hpp>

#include "util/status.h"

namespace qr {
namespace {

/// "https://host:8080/path" -> "host:8080"; empty when 'uri' has no "scheme://".
std::string_view AuthorityOf(std::string_view uri) {
  size_t scheme_end = uri.find("://");
  if (scheme_end == std::string_view::npos) return {};
  std::string_view rest = uri.substr(scheme_end + 3);
  return rest.substr(0, rest.find_first_of("/?#"));
}

bool SameAuthority(std::string_view a, std::string_view b) {
  return !a.empty() && boost::beast::iequals(boost::beast::string_view(a.data(), a.size()),
                                             boost::beast::string_view(b.data(), b.size()));
}

}  // namespace

bool IsStateChangingMethod(const HttpRequest& req) {
  namespace http = boost::beast::http;
  return req.method != http::verb::get && req.method != http::verb::head &&
         req.method != http::verb::options;
}

bool IsCrossOriginWrite(const HttpRequest& req, std::string* why) {
  if (!IsStateChangingMethod(req)) return false;
  std::string_view source = req.Header("Origin");
  const char* header = "Origin";
  std::string_view authority;
  if (!source.empty()) {
    authority = source == "null" ? std::string_view() : AuthorityOf(source);
  } else {
    source = req.Header("Referer");
    header = "Referer";
    if (source.empty()) return false;
    authority = AuthorityOf(source);
  }
  if (SameAuthority(authority, req.Header("Host")) ||
      SameAuthority(authority, req.Header("X-Forwarded-Host"))) {
    return false;
  }
  *why = "Cross-origin " + std::string(req.method_string) + " refused: " + header + " " +
         QuoteForError(source, 200) + " is not this server (Host " +
         QuoteForError(req.Header("Host"), 200) +
         "); state-changing requests are accepted from this server's own pages and from "
         "clients that send no Origin";
  return true;
}

}  // namespace qr
