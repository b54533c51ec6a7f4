#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "http/webserver.h"

/// Cross-site request forgery defence for the webserver: pure functions, no I/O.
/// Thread-safety: all functions are thread-safe.

namespace qr {

/// True for the methods that change state (anything but GET, HEAD and OPTIONS).
bool IsStateChangingMethod(const HttpRequest& req);

/// True when a state-changing request comes from another origin than this server: its
/// `Origin` (else its `Referer`) names a host[:port] other than its `Host` (or
/// `X-Forwarded-Host`, which a cross-site page cannot send either), or is "null" (a sandboxed
/// frame or a redirect chain: no same-origin page sends it). A request with neither header
/// (every non-browser client: the Trino clients, curl) is not cross-origin. '*why' gets the
/// message of the 403 answer.
///
/// Browsers attach cached Basic credentials to a cross-site form post (`enctype=text/plain`
/// needs no CORS preflight), so without this a hostile page could submit or cancel queries
/// as whoever last logged in from that browser.
bool IsCrossOriginWrite(const HttpRequest& req, std::string* why);

/// Whether a request whose Host header is 'host' (host[:port]; empty: none, as HTTP/1.0 may
/// send) may be served by a server that answers to the names 'allowed': an IP address,
/// "localhost" (and "*.localhost", which resolve to loopback), or a name of 'allowed'
/// (case-insensitive, any port; "*" allows every name).
///
/// The defence against DNS rebinding: a hostile page whose own name an attacker points at
/// 127.0.0.1 reaches a server on loopback as the same origin (the Origin check above sees its
/// Host equal to its Origin), and reads what it answers; the browser sends that name as Host.
bool IsAllowedHost(std::string_view host, const std::vector<std::string>& allowed);

}  // namespace qr
