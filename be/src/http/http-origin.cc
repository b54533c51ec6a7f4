#include "http/http-origin.h"

#include <boost/asio/ip/address.hpp>
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

bool IsAllowedHost(std::string_view host, const std::vector<std::string>& allowed) {
  if (host.empty()) return true;
  // host[:port], [v6][:port].
  std::string_view name = host;
  if (name.front() == '[') {
    const size_t close = name.find(']');
    if (close == std::string_view::npos) return false;
    boost::system::error_code ec;
    boost::asio::ip::make_address_v6(std::string(name.substr(1, close - 1)), ec);
    return !ec;
  }
  name = name.substr(0, name.find(':'));
  boost::system::error_code ec;
  boost::asio::ip::make_address_v4(std::string(name), ec);
  if (!ec) return true;
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);  // "localhost."
  auto iequals = [](std::string_view a, std::string_view b) {
    return boost::beast::iequals(boost::beast::string_view(a.data(), a.size()),
                                 boost::beast::string_view(b.data(), b.size()));
  };
  constexpr std::string_view kLocalhost = "localhost";
  if (iequals(name, kLocalhost) ||
      (name.size() > kLocalhost.size() + 1 &&
       iequals(name.substr(name.size() - kLocalhost.size() - 1), ".localhost"))) {
    return true;
  }
  for (const std::string& a : allowed) {
    if (a == "*" || iequals(name, a)) return true;
  }
  return false;
}

}  // namespace qr
