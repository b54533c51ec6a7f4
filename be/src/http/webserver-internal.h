#pragma once

// Internal to the webserver (webserver.cc, webserver-accept.cc, webserver-session.{h,cc},
// webserver-response.cc): the server's state and the interface of a connection. Not for other
// users.

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/string.hpp>

#include "util/mutex.h"
#include "util/thread-annotations.h"
#include "http/webserver.h"

namespace qr {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

/// A connection's executor: the io_context of the one I/O thread that serves the connection.
/// One thread runs each io_context, so a connection's handlers never run concurrently (no
/// strand needed), and one I/O thread never wakes another.
using IoExecutor = asio::io_context::executor_type;
using IoSocket = tcp::socket::rebind_executor<IoExecutor>::other;

/// The server's state. Lifecycle: RegisterHandler()* -> Start() -> Stop() -> destruction.
/// Thread-safety: the counters are atomics; 'routes' is written only before Start() and
/// read-only afterwards (starting the I/O threads orders the writes before every read); the
/// acceptor and its retry timer are used by Start()/Stop() and by the one accept chain
/// running on I/O thread 0, never at the same time (Stop() joins the threads first).
/// Threading: I/O thread i runs iocs[i] alone. The acceptor hands each accepted connection to
/// the next io_context in turn; everything of a connection then runs on that one thread.
/// Other threads (executors completing long polls, password verification) post to it.
/// Lock order: lifecycle_mu -> control->mu -> sessions_mu; address_mu and tls_mu are leaves.
/// None is held while a handler runs.
struct Webserver::Impl {
  class SessionBase;
  template <class Stream>
  class Session;
  struct PendingResponse;

  /// Shared by the server and every ResponseCallback; outlives the server, so that a callback
  /// fired after Stop() or after destruction finds 'stopped' and does nothing.
  struct Control {
    Mutex mu;
    /// Once true, no callback touches a session or posts to the io_context.
    bool stopped QR_GUARDED_BY(mu) = false;
  };

  struct Route {
    std::string path;
    /// The path ends with '/': it also matches every path it prefixes.
    bool prefix = false;
    std::vector<std::pair<http::verb, HttpHandler>> handlers;
    /// The value of the Allow header for a 405 ("GET, HEAD, POST").
    std::string allow;
    /// HEAD falls back to the GET handler (unless Webserver::DisallowHead()).
    bool head_allowed = true;

    /// The handler for 'method'; HEAD falls back to GET (*head_as_get set) when allowed.
    const HttpHandler* Find(http::verb method, bool* head_as_get) const;
  };

  enum class State { kNew, kRunning, kStopped };

  explicit Impl(Options o);

  const Route* FindRoute(std::string_view path) const;
  /// The route registered for exactly 'path', added if new. QR_REQUIRES: before Start().
  Route* RouteFor(std::string path);
  /// Sorts the routes longest path first and computes their Allow headers.
  void FinishRoutes();
  void DoAccept();
  void OnAccept(const beast::error_code& ec, IoSocket socket);
  /// accept() failed: out of descriptors, answers a waiting connection through the spare;
  /// then accepts again at once or after a back-off (webserver-accept.cc).
  void OnAcceptError(const beast::error_code& ec);
  /// Accepts again after a back-off that doubles (10 ms to 1 s); logs at most every 10 s.
  void RetryAcceptLater(const beast::error_code& ec);
  /// Counts and logs (at most every 10 s) a refusal, answers 'socket' a minimal 503 (plain
  /// HTTP only) and closes it.
  void Refuse(IoSocket& socket, ConnectionLimit why, const std::string& peer);
  /// The same for a descriptor not (or no longer) owned by a socket object.
  void RefuseFd(int fd, ConnectionLimit why, const std::string& peer);
  /// Takes one of the connections of 'key' (AddressKey); false when it has them all.
  bool AdmitAddress(const std::string& key);
  /// Gives back a connection AdmitAddress() took.
  void ReleaseAddress(const std::string& key);
  /// Makes each io_context create its reactor now (webserver-accept.cc).
  void WarmUpIoContexts();
  /// (Re)opens the spare file descriptor if it is not held; false when that fails.
  bool TakeSpareFd();
  /// A plain or TLS session (per options.tls_context; a TLS one with the current
  /// 'tls_context') on an accepted socket (webserver-session.cc).
  std::shared_ptr<SessionBase> MakeSession(IoSocket socket, std::string remote_address);
  void RunIoThread(int index);
  /// Whether 'ioc' (may be null) is one of this server's.
  bool OwnsIoContext(const asio::io_context* ioc) const;
  /// The io_context the next accepted connection goes to (round robin).
  asio::io_context& NextIoContext();
  void CountResponse(unsigned status) {
    responses[status < responses.size() ? status : 0].fetch_add(1, std::memory_order_relaxed);
  }
  /// Closes every open connection. QR_REQUIRES: the I/O threads are joined.
  void CloseAllSessions();
  /// Counts a connection closed; wakes Drain() when it was the last one.
  void ConnectionClosed() {
    // seq_cst, with Drain()'s store of 'draining' and load of the count: either this thread
    // sees 'draining' and notifies, or Drain() sees the count this decrement left.
    if (connections_open.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
        draining.load(std::memory_order_seq_cst)) {
      MutexLock l(&drain_mu);
      drain_cv.NotifyAll();
    }
  }

  const Options options;
  std::vector<Route> routes;

  // Statistics only, so relaxed: nothing is ordered by them.
  std::array<std::atomic<uint64_t>, 600> responses{};
  std::atomic<uint64_t> connections_accepted{0};
  std::atomic<uint64_t> connections_open{0};
  std::array<std::atomic<uint64_t>, kNumConnectionLimits> connections_refused{};
  std::atomic<int> port{0};
  /// Set by Drain(): responses close their connections, and connections waiting for a request
  /// close.
  std::atomic<bool> draining{false};
  /// Drain() waits on 'drain_cv' for 'connections_open' to reach 0. A leaf.
  Mutex drain_mu;
  CondVar drain_cv;

  const std::shared_ptr<Control> control = std::make_shared<Control>();

  /// Serializes Start() and Stop() (which joins threads: never held by an I/O thread).
  Mutex lifecycle_mu QR_ACQUIRED_BEFORE(sessions_mu);
  State state QR_GUARDED_BY(lifecycle_mu) = State::kNew;

  /// Protects 'sessions', the registry of open connections Stop() closes.
  Mutex sessions_mu;
  std::unordered_map<SessionBase*, std::weak_ptr<SessionBase>> sessions QR_GUARDED_BY(sessions_mu);

  /// Protects 'tls_context'. A leaf.
  Mutex tls_mu;
  /// The context new TLS connections use (null for plain HTTP): options.tls_context until
  /// Webserver::ReplaceTlsContext(). Each TLS session keeps the one it started with.
  std::shared_ptr<asio::ssl::context> tls_context QR_GUARDED_BY(tls_mu);

  /// Protects 'connections_by_address'. A leaf.
  Mutex address_mu;
  /// Open connections by AddressKey(), for 'max_connections_per_address' (none without it).
  std::unordered_map<std::string, int> connections_by_address QR_GUARDED_BY(address_mu);

  // Used only by the accept chain (on I/O thread 0), and by Start()/Stop() when it is not
  // running.
  /// Opened at Start() (on /dev/null), given up to answer a connection when accept() finds no
  /// descriptor; -1 when not held.
  int spare_fd = -1;
  /// The delay before accepting again after accept() failed without the spare's help.
  std::chrono::milliseconds accept_backoff{0};
  /// When each refusal reason (and, last, other accept errors) was last logged, and how many
  /// had happened then.
  std::array<std::chrono::steady_clock::time_point, kNumConnectionLimits + 1> last_refusal_log{};
  std::array<uint64_t, kNumConnectionLimits + 1> refusals_at_last_log{};
  uint64_t accept_errors = 0;

  // Declared after everything a Session's destructor touches: sessions owned by handlers
  // still queued in the io_context die when it is destroyed.
  /// One per I/O thread, each created with concurrency hint 1 (one thread runs it).
  std::vector<std::unique_ptr<asio::io_context>> iocs;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work
      QR_GUARDED_BY(lifecycle_mu);
  /// Used only by the accept chain (on I/O thread 0).
  size_t next_ioc = 0;
  tcp::acceptor acceptor{*iocs[0]};
  asio::steady_timer accept_retry_timer{*iocs[0]};
  std::vector<std::thread> threads QR_GUARDED_BY(lifecycle_mu);
};

/// What the server and the ResponseCallbacks see of a connection, plain or TLS
/// (Session<Stream>, webserver-session.h, implements it).
/// Thread-safety: OnIoThread()/executor() from any thread; Start() once, after construction;
/// Complete() on its I/O thread; Close() on it or from Stop() after the I/O threads are
/// joined.
class Webserver::Impl::SessionBase : public std::enable_shared_from_this<SessionBase> {
 public:
  virtual ~SessionBase() { ReleaseAddressSlot(); }
  virtual void Start() = 0;
  /// Writes the response of the pending request number 'seq'; ignored when the connection
  /// is closed or has moved on. 'dropped': the handler never called its ResponseCallback.
  virtual void Complete(uint64_t seq, HttpResponse resp, bool dropped) = 0;
  virtual void Close() = 0;
  /// On the connection's I/O thread, when Drain() starts: closes the connection if it waits
  /// for a request of which nothing arrived; otherwise its current request is answered (the
  /// response closes the connection).
  virtual void DrainIfIdle() = 0;

  /// Holds one of 'server''s connections of address 'key' until ReleaseAddressSlot() or
  /// destruction ('server' must outlive the session, as it does: Stop() joins every I/O
  /// thread before the server goes). Called once, by the acceptor, before Start().
  void HoldAddressSlot(Impl* server, std::string key) {
    slot_server_ = server;
    slot_key_ = std::move(key);
  }
  /// Gives the slot back (idempotent). Called where the connection closes (its I/O thread,
  /// or Stop() after the I/O threads are joined), before 'connections_open' drops.
  void ReleaseAddressSlot() {
    if (slot_server_ != nullptr) slot_server_->ReleaseAddress(slot_key_);
    slot_server_ = nullptr;
  }

  bool OnIoThread() const { return executor_.running_in_this_thread(); }
  const IoExecutor& executor() const { return executor_; }

 protected:
  explicit SessionBase(IoExecutor executor) : executor_(std::move(executor)) {}

  /// The socket's executor, kept apart so that other threads may read it (const).
  const IoExecutor executor_;

 private:
  Impl* slot_server_ = nullptr;
  std::string slot_key_;
};

/// The state shared by the copies of one ResponseCallback. Delivers the response exactly
/// once; if every copy is destroyed without a call, the client gets a 500.
struct Webserver::Impl::PendingResponse {
  PendingResponse(std::shared_ptr<Control> c, std::weak_ptr<SessionBase> s, uint64_t n)
      : control(std::move(c)), session(std::move(s)), seq(n) {}
  ~PendingResponse() {
    if (!delivered.load(std::memory_order_acquire)) {
      Deliver(HttpResponse::Text(500, "Internal error: the request was dropped by its handler"),
              /*dropped=*/true);
    }
  }

  /// Returns false when a response was delivered before.
  bool Deliver(HttpResponse resp, bool dropped);

  const std::shared_ptr<Control> control;
  const std::weak_ptr<SessionBase> session;
  const uint64_t seq;
  std::atomic<bool> delivered{false};
};

/// Beast 1.74's string_view is boost::string_view.
inline std::string_view ToStd(beast::string_view s) { return std::string_view(s.data(), s.size()); }

/// "127.0.0.1:8080", "[::1]:8080".
std::string EndpointString(const tcp::endpoint& ep);

}  // namespace qr
