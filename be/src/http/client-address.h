#pragma once

// Who a request comes from: trusted proxy networks, the client address behind them
// (X-Forwarded-For), and the key that per-address limits count under.

#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ip/address.hpp>

#include "util/status.h"

namespace qr {

/// A set of IP networks ("10.0.0.0/8", "192.0.2.7", "::1", "2001:db8::/32").
/// Thread-safety: immutable after Parse(); const methods are thread-safe.
class IpNetworks {
 public:
  /// Parses a comma-separated list of addresses and CIDRs, IPv4 and IPv6 (spaces around
  /// entries are ignored; empty means no network). An error names the bad entry and what is
  /// accepted.
  static Status Parse(std::string_view list, IpNetworks* out);

  /// Whether 'address' lies in one of the networks. An IPv4-mapped IPv6 address
  /// (::ffff:a.b.c.d) is looked up as its IPv4 address.
  bool Contains(const boost::asio::ip::address& address) const;
  /// The same for a textual address; false when it is not an IP address.
  bool Contains(std::string_view address) const;
  bool empty() const { return networks_.empty(); }

 private:
  struct Network {
    boost::asio::ip::address base;  // Host bits cleared.
    int prefix_len = 0;
  };
  std::vector<Network> networks_;
};

/// The address a request comes from, given the peer 'remote_ip' of its connection and its
/// X-Forwarded-For header(s) ('forwarded_for', the values joined with commas; empty if none).
/// The header counts only when 'remote_ip' is in 'trusted_proxies': its entries are then read
/// from the right (the ones the proxies appended themselves) and the first that is not a
/// trusted proxy is the client. Every entry trusted: the leftmost. An entry that is not an IP
/// address where the client should be: 'remote_ip' (no guess). Ports ("1.2.3.4:5",
/// "[::1]:5") are dropped.
std::string ClientIp(std::string_view remote_ip, std::string_view forwarded_for,
                     const IpNetworks& trusted_proxies);

/// The key a per-address limit counts 'ip' under, so that rotating through addresses one
/// host can use freely does not give fresh budgets: an IPv4 address as is, but all of
/// 127.0.0.0/8 and ::1 as one key ("loopback"); an IPv6 address by its /64 ("2001:db8:1:2::/64",
/// the smallest subnet a site is usually given); an IPv4-mapped IPv6 address as its IPv4
/// address. Text that is not an IP address is its own key.
std::string AddressKey(std::string_view ip);

}  // namespace qr
