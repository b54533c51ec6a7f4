#include "service/access-control.h"

#include <cctype>

#include "service/client-request-state.h"
#include "service/statement-service.h"
#include "util/status.h"

namespace qr {
namespace {

/// The protocol user header (X-Trino-User, else X-Presto-User), or empty.
std::string_view UserHeader(const HttpRequest& req) {
  std::string_view v = req.Header("X-Trino-User");
  return v.empty() ? req.Header("X-Presto-User") : v;
}

}  // namespace

std::unordered_set<std::string> ParseUserList(std::string_view list) {
  std::unordered_set<std::string> users;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view user = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    auto space = [](char c) { return isspace(static_cast<unsigned char>(c)) != 0; };
    while (!user.empty() && space(user.front())) user.remove_prefix(1);
    while (!user.empty() && space(user.back())) user.remove_suffix(1);
    if (!user.empty()) users.emplace(user);
  }
  return users;
}

std::string DescribeUser(std::string_view user, std::string_view principal) {
  std::string out = "user " + QuoteForError(user);
  if (!principal.empty() && principal != user) {
    out += " (authenticated as " + QuoteForError(principal) + ")";
  }
  return out;
}

std::string Principal::Describe() const { return DescribeUser(user, authenticated); }

AccessControl::AccessControl(bool authentication_enabled, std::string_view admin_users)
    : authentication_enabled_(authentication_enabled), admins_(ParseUserList(admin_users)) {}

Principal AccessControl::Identify(const HttpRequest& req) const {
  Principal p;
  if (!authentication_enabled_) {
    p.user = RequestUser(req);
    p.admin = IsAdmin(p.user);
    return p;
  }
  std::string_view header = UserHeader(req);
  p.user = header.empty() ? req.authenticated_user : std::string(header);
  p.admin = IsAdmin(req.authenticated_user);
  p.authenticated = req.authenticated_user;
  return p;
}

bool AccessControl::CheckUserHeader(const HttpRequest& req, HttpResponse* denied) const {
  if (!authentication_enabled_) return true;
  std::string_view header = UserHeader(req);
  if (header.empty() || header == req.authenticated_user || IsAdmin(req.authenticated_user)) {
    return true;
  }
  *denied = HttpResponse::Text(
      403, "User " + QuoteForError(req.authenticated_user) + " may not act as user " +
               QuoteForError(header) + ": the X-Trino-User (X-Presto-User) header must name "
               "the authenticated user (only --admin_users may name another)\n");
  return false;
}

bool AccessControl::HasUserHeader(const HttpRequest& req) { return !UserHeader(req).empty(); }

bool AccessControl::MayAccess(const Principal& p, const ClientRequestState& query) const {
  return MayAccessUser(p, query.user());
}

bool AccessControl::MayAccessUser(const Principal& p, std::string_view user) const {
  return !authentication_enabled_ || p.admin || p.user == user;
}

}  // namespace qr
