#include "http/client-address.h"

#include <algorithm>
#include <charconv>

namespace qr {
namespace ip = boost::asio::ip;

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool ParseIp(std::string_view text, ip::address* out) {
  boost::system::error_code ec;
  *out = ip::make_address(std::string(text), ec);
  if (ec) return false;
  if (out->is_v6() && out->to_v6().is_v4_mapped()) {
    *out = ip::make_address_v4(ip::v4_mapped, out->to_v6());
  }
  return true;
}

/// 'a' with all but its first 'prefix_len' bits cleared.
ip::address Masked(const ip::address& a, int prefix_len) {
  if (a.is_v4()) {
    auto bytes = a.to_v4().to_bytes();
    for (int i = 0; i < 4; ++i) {
      const int keep = std::clamp(prefix_len - 8 * i, 0, 8);
      bytes[i] &= static_cast<unsigned char>(0xff00u >> keep);
    }
    return ip::address_v4(bytes);
  }
  auto bytes = a.to_v6().to_bytes();
  for (int i = 0; i < 16; ++i) {
    const int keep = std::clamp(prefix_len - 8 * i, 0, 8);
    bytes[i] &= static_cast<unsigned char>(0xff00u >> keep);
  }
  return ip::address_v6(bytes);
}

/// An X-Forwarded-For entry without its port: "1.2.3.4:5" -> "1.2.3.4", "[::1]:5" -> "::1".
std::string_view StripPort(std::string_view entry) {
  if (!entry.empty() && entry.front() == '[') {
    size_t close = entry.find(']');
    return close == std::string_view::npos ? entry : entry.substr(1, close - 1);
  }
  // One colon: IPv4 with a port; more: a bare IPv6 address.
  size_t colon = entry.find(':');
  if (colon != std::string_view::npos && entry.find(':', colon + 1) == std::string_view::npos) {
    return entry.substr(0, colon);
  }
  return entry;
}

}  // namespace

Status IpNetworks::Parse(std::string_view list, IpNetworks* out) {
  IpNetworks result;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view entry = Trim(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (entry.empty()) continue;
    const size_t slash = entry.find('/');
    Network n;
    bool ok = ParseIp(entry.substr(0, slash), &n.base);
    const int max_len = n.base.is_v4() ? 32 : 128;
    n.prefix_len = max_len;
    if (ok && slash != std::string_view::npos) {
      std::string_view len = entry.substr(slash + 1);
      auto [end, ec] = std::from_chars(len.data(), len.data() + len.size(), n.prefix_len);
      ok = ec == std::errc() && end == len.data() + len.size() && !len.empty() &&
           n.prefix_len >= 0 && n.prefix_len <= max_len;
    }
    if (!ok) {
      return InvalidArgument("bad trusted proxy " + QuoteForError(entry, 64) +
                             ": expected an IPv4 or IPv6 address or a CIDR (10.0.0.0/8, "
                             "192.0.2.7, ::1, 2001:db8::/32), comma-separated");
    }
    n.base = Masked(n.base, n.prefix_len);
    result.networks_.push_back(n);
  }
  *out = std::move(result);
  return Status::OK();
}

bool IpNetworks::Contains(const ip::address& address) const {
  ip::address a = address;
  if (a.is_v6() && a.to_v6().is_v4_mapped()) a = ip::make_address_v4(ip::v4_mapped, a.to_v6());
  for (const Network& n : networks_) {
    if (n.base.is_v4() == a.is_v4() && Masked(a, n.prefix_len) == n.base) return true;
  }
  return false;
}

bool IpNetworks::Contains(std::string_view address) const {
  ip::address a;
  return ParseIp(address, &a) && Contains(a);
}

std::string ClientIp(std::string_view remote_ip, std::string_view forwarded_for,
                     const IpNetworks& trusted_proxies) {
  if (forwarded_for.empty() || !trusted_proxies.Contains(remote_ip)) {
    return std::string(remote_ip);
  }
  std::string_view rest = forwarded_for;
  std::string_view leftmost;
  while (!rest.empty()) {
    size_t comma = rest.rfind(',');
    std::string_view entry =
        StripPort(Trim(comma == std::string_view::npos ? rest : rest.substr(comma + 1)));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(0, comma);
    if (entry.empty()) continue;
    ip::address a;
    if (!ParseIp(entry, &a)) return std::string(remote_ip);
    leftmost = entry;
    if (!trusted_proxies.Contains(a)) return a.to_string();
  }
  if (leftmost.empty()) return std::string(remote_ip);
  ip::address a;
  ParseIp(leftmost, &a);
  return a.to_string();
}

std::string AddressKey(std::string_view ip_text) {
  ip::address a;
  if (!ParseIp(ip_text, &a)) return std::string(ip_text);
  if (a.is_loopback()) return "loopback";
  if (a.is_v4()) return a.to_string();
  return Masked(a, 64).to_string() + "/64";
}

}  // namespace qr
