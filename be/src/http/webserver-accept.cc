// The webserver's accept chain: connection limits (in total, per address), and what happens
// when the process is out of file descriptors.

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include <glog/logging.h>

#include "http/webserver-internal.h"

namespace qr {
namespace {

using Clock = std::chrono::steady_clock;

/// A refusal reason is logged at most this often (with the count since the last line).
constexpr std::chrono::seconds kRefusalLogInterval{10};
/// The back-off after accept() failed and the spare descriptor could not help.
constexpr std::chrono::milliseconds kMinAcceptBackoff{10};
constexpr std::chrono::milliseconds kMaxAcceptBackoff{1000};
/// The index of other accept errors in the refusal logs.
constexpr size_t kAcceptErrorLog = Webserver::kNumConnectionLimits;

/// The answer to a connection refused for 'why' (plain HTTP), naming the limit and its flag.
std::string RefusalResponse(Webserver::ConnectionLimit why, int64_t limit) {
  std::string body;
  switch (why) {
    case Webserver::ConnectionLimit::kMaxConnections:
      body = "The server has " + std::to_string(limit) +
             " connections open, the most it accepts (--max_connections); try again later\n";
      break;
    case Webserver::ConnectionLimit::kPerAddress:
      body = "Your address has " + std::to_string(limit) +
             " connections open, the most the server accepts from one address "
             "(--max_connections_per_address); try again later\n";
      break;
    case Webserver::ConnectionLimit::kFileDescriptors:
      body = "The server is out of file descriptors (its open file limit); try again later\n";
      break;
  }
  return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
         "X-Content-Type-Options: nosniff\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + body;
}

const char* Describe(Webserver::ConnectionLimit why) {
  switch (why) {
    case Webserver::ConnectionLimit::kMaxConnections: return "max_connections";
    case Webserver::ConnectionLimit::kPerAddress: return "max_connections_per_address";
    case Webserver::ConnectionLimit::kFileDescriptors: return "file descriptors";
  }
  return "?";
}

bool OutOfDescriptors(const beast::error_code& ec) {
  return ec == asio::error::no_descriptors ||
         ec == boost::system::errc::too_many_files_open_in_system;
}

}  // namespace

bool Webserver::Impl::TakeSpareFd() {
  if (spare_fd < 0) spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  return spare_fd >= 0;
}

void Webserver::Impl::DoAccept() {
  if (!acceptor.is_open()) return;  // Drain() closed it.
  try {
    acceptor.async_accept(NextIoContext().get_executor(),
                          [this](beast::error_code ec, IoSocket socket) {
                            OnAccept(ec, std::move(socket));
                          });
  } catch (const boost::system::system_error& e) {
    // Starting the operation may need resources (e.g. descriptors): retry later rather than
    // let the accept chain end.
    RetryAcceptLater(e.code());
  }
}

void Webserver::Impl::WarmUpIoContexts() {
  // Asio creates a context's reactor (an epoll and an eventfd descriptor) at its first
  // socket or timer: do it now, not when the process may be out of descriptors.
  for (auto& ioc : iocs) {
    IoSocket socket(ioc->get_executor());
    asio::steady_timer timer(*ioc);
  }
}

bool Webserver::Impl::AdmitAddress(const std::string& key) {
  MutexLock l(&address_mu);
  int& open = connections_by_address[key];
  if (open >= options.max_connections_per_address) {
    if (open == 0) connections_by_address.erase(key);
    return false;
  }
  ++open;
  return true;
}

void Webserver::Impl::ReleaseAddress(const std::string& key) {
  MutexLock l(&address_mu);
  auto it = connections_by_address.find(key);
  if (it == connections_by_address.end()) return;
  if (--it->second <= 0) connections_by_address.erase(it);
}

void Webserver::Impl::Refuse(IoSocket& socket, ConnectionLimit why, const std::string& peer) {
  RefuseFd(socket.release(), why, peer);
}

void Webserver::Impl::RefuseFd(int fd, ConnectionLimit why, const std::string& peer) {
  const size_t i = static_cast<size_t>(why);
  const uint64_t n = connections_refused[i].fetch_add(1, std::memory_order_relaxed) + 1;
  const auto now = Clock::now();
  if (refusals_at_last_log[i] == 0 || now - last_refusal_log[i] >= kRefusalLogInterval) {
    LOG(WARNING) << "HTTP connection from " << peer << " refused (" << Describe(why)
                 << (why == ConnectionLimit::kMaxConnections
                         ? ": " + std::to_string(options.max_connections)
                     : why == ConnectionLimit::kPerAddress
                         ? ": " + std::to_string(options.max_connections_per_address)
                         : std::string(": out of them; see the open file limit, ulimit -n"))
                 << "); " << n - refusals_at_last_log[i] << " refused since the last such line, "
                 << n << " in all (logged at most every " << kRefusalLogInterval.count() << " s)";
    last_refusal_log[i] = now;
    refusals_at_last_log[i] = n;
  }
  if (!options.tls_context) {
    // Read what the request already sent, so that closing does not reset the connection
    // before the client read the answer; then answer without waiting.
    char discard[4096];
    for (int reads = 0; reads < 4 && recv(fd, discard, sizeof(discard), MSG_DONTWAIT) > 0;) {
      ++reads;
    }
    const std::string answer = RefusalResponse(
        why, why == ConnectionLimit::kMaxConnections ? options.max_connections
                                                     : options.max_connections_per_address);
    (void)!send(fd, answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  shutdown(fd, SHUT_WR);
  close(fd);
}

void Webserver::Impl::OnAcceptError(const beast::error_code& ec) {
  if (OutOfDescriptors(ec) && spare_fd >= 0) {
    // The classic trick: give up the spare, accept the waiting connection with it, answer and
    // close it, take the spare back. Each such error drains one connection from the backlog,
    // so the acceptor does not spin.
    close(spare_fd);
    spare_fd = -1;
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    const int fd = accept4(acceptor.native_handle(), reinterpret_cast<sockaddr*>(&addr), &len,
                           SOCK_CLOEXEC | SOCK_NONBLOCK);
    const bool drained = fd < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    if (fd >= 0) {
      tcp::endpoint remote;
      if (len <= remote.capacity()) {
        memcpy(remote.data(), &addr, len);
        remote.resize(len);
      }
      RefuseFd(fd, ConnectionLimit::kFileDescriptors, EndpointString(remote));
    }
    const bool accept_ok = fd >= 0 || drained;
    if (TakeSpareFd() && accept_ok) {
      accept_backoff = std::chrono::milliseconds(0);
      return DoAccept();
    }
  }
  RetryAcceptLater(ec);
}

void Webserver::Impl::RetryAcceptLater(const beast::error_code& ec) {
  // No spare to help: wait, longer each time, so that the acceptor does not spin.
  ++accept_errors;
  accept_backoff = std::clamp(accept_backoff * 2, kMinAcceptBackoff, kMaxAcceptBackoff);
  const auto now = Clock::now();
  if (refusals_at_last_log[kAcceptErrorLog] == 0 ||
      now - last_refusal_log[kAcceptErrorLog] >= kRefusalLogInterval) {
    LOG(WARNING) << "HTTP accept failed: " << ec.message() << "; retrying in "
                 << accept_backoff.count() << " ms (" << accept_errors
                 << " failures in all, logged at most every " << kRefusalLogInterval.count()
                 << " s)";
    last_refusal_log[kAcceptErrorLog] = now;
    refusals_at_last_log[kAcceptErrorLog] = accept_errors;
  }
  accept_retry_timer.expires_after(accept_backoff);
  accept_retry_timer.async_wait([this](beast::error_code wait_ec) {
    if (wait_ec) return;
    TakeSpareFd();
    DoAccept();
  });
}

void Webserver::Impl::OnAccept(const beast::error_code& ec, IoSocket socket) {
  if (ec == asio::error::operation_aborted) return;
  if (ec) return OnAcceptError(ec);
  accept_backoff = std::chrono::milliseconds(0);
  beast::error_code opt_ec;
  socket.set_option(tcp::no_delay(true), opt_ec);
  tcp::endpoint remote = socket.remote_endpoint(opt_ec);
  if (opt_ec) {  // Reset before we looked at it.
    socket.close(opt_ec);
    return DoAccept();
  }
  if (connections_open.load(std::memory_order_relaxed) >=
      static_cast<uint64_t>(options.max_connections)) {
    Refuse(socket, ConnectionLimit::kMaxConnections, EndpointString(remote));
    return DoAccept();
  }
  std::string address_key;
  if (options.max_connections_per_address > 0 &&
      !options.per_address_exempt.Contains(remote.address())) {
    address_key = AddressKey(remote.address().to_string());
    if (!AdmitAddress(address_key)) {
      Refuse(socket, ConnectionLimit::kPerAddress, EndpointString(remote));
      return DoAccept();
    }
  }
  connections_accepted.fetch_add(1, std::memory_order_relaxed);
  connections_open.fetch_add(1, std::memory_order_relaxed);
  std::shared_ptr<SessionBase> session = MakeSession(std::move(socket), EndpointString(remote));
  if (!address_key.empty()) session->HoldAddressSlot(this, std::move(address_key));
  {
    MutexLock l(&sessions_mu);
    sessions.emplace(session.get(), session);
  }
  session->Start();
  DoAccept();
}

}  // namespace qr
