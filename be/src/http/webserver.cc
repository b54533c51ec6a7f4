#include "http/webserver.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include <boost/asio/post.hpp>
#include <glog/logging.h>

#include "http/webserver-internal.h"

namespace qr {
namespace {

Status ValidateOptions(const Webserver::Options& o) {
  if (o.port < 0 || o.port > 65535) {
    return InvalidArgument("HTTP port " + std::to_string(o.port) +
                           " is out of range: expected 0 (any free port) to 65535");
  }
  if (o.num_threads < 1) {
    return InvalidArgument("the number of HTTP threads must be at least 1, got " +
                           std::to_string(o.num_threads));
  }
  if (o.max_header_bytes < 256 || o.max_header_bytes > (1u << 30)) {
    return InvalidArgument("max_header_bytes must be between 256 and 2^30, got " +
                           std::to_string(o.max_header_bytes));
  }
  if (o.idle_timeout.count() <= 0 || o.max_connections < 1) {
    return InvalidArgument("idle_timeout and max_connections must be positive");
  }
  if (o.max_connections_per_address < 0) {
    return InvalidArgument("max_connections_per_address must be >= 0 (0: no limit), got " +
                           std::to_string(o.max_connections_per_address));
  }
  return Status::OK();
}

// Resolves the bind address: a numeric IPv4/IPv6 address, or a host name such as "localhost"
// (start-up only, so a blocking lookup is fine).
Status ResolveBindAddress(const Webserver::Options& o, tcp::endpoint* out) {
  beast::error_code ec;
  asio::ip::address address = asio::ip::make_address(o.bind_address, ec);
  if (!ec) {
    *out = tcp::endpoint(address, static_cast<uint16_t>(o.port));
    return Status::OK();
  }
  asio::io_context ioc;
  tcp::resolver resolver(ioc);
  auto results = resolver.resolve(o.bind_address, std::to_string(o.port),
                                  tcp::resolver::numeric_service | tcp::resolver::passive, ec);
  if (ec || results.empty()) {
    return InvalidArgument("bad HTTP bind address " + QuoteForError(o.bind_address) + ": " +
                           (ec ? ec.message() : std::string("no address")) +
                           "; expected an IP address (127.0.0.1, 0.0.0.0, ::) or a host name");
  }
  *out = results.begin()->endpoint();
  return Status::OK();
}

std::vector<std::unique_ptr<asio::io_context>> MakeIoContexts(int n) {
  std::vector<std::unique_ptr<asio::io_context>> iocs;
  // Hint 1: exactly one thread runs each, so Asio skips the locking its scheduler needs when
  // several threads run one io_context (posts from other threads stay safe).
  for (int i = 0; i < n; ++i) iocs.push_back(std::make_unique<asio::io_context>(1));
  return iocs;
}

/// The io_context run by the calling thread, if it is an I/O thread (for Webserver::io_context()).
thread_local asio::io_context* tls_io_context = nullptr;

}  // namespace

Webserver::Impl::Impl(Options o)
    : options(std::move(o)), iocs(MakeIoContexts(std::max(1, options.num_threads))) {
  MutexLock l(&tls_mu);
  tls_context = options.tls_context;
}

std::string EndpointString(const tcp::endpoint& ep) {
  std::string address = ep.address().to_string();
  if (ep.address().is_v6()) address = "[" + address + "]";
  return address + ":" + std::to_string(ep.port());
}

bool Webserver::Impl::PendingResponse::Deliver(HttpResponse resp, bool dropped) {
  if (delivered.exchange(true, std::memory_order_acq_rel)) return false;
  std::shared_ptr<SessionBase> on_thread;
  {
    // Under control->mu, a session reference is taken and handed to the io_context only
    // while the server runs, so no session outlives the io_context's destruction in a
    // callback's hands.
    MutexLock l(&control->mu);
    if (control->stopped) return true;
    std::shared_ptr<SessionBase> s = session.lock();
    if (s == nullptr) return true;  // The connection is gone.
    if (!s->OnIoThread()) {
      IoExecutor ex = s->executor();  // A copy: 's' is moved below.
      asio::post(ex, [s = std::move(s), n = seq, r = std::move(resp), dropped]() mutable {
        s->Complete(n, std::move(r), dropped);
      });
      return true;
    }
    on_thread = std::move(s);
  }
  // Called from the handler itself (the common synchronous case), or from other work on the
  // connection's I/O thread: answer without a round trip through the queue. An I/O thread is
  // running, so the server is not destroyed meanwhile.
  on_thread->Complete(seq, std::move(resp), dropped);
  return true;
}

const HttpHandler* Webserver::Impl::Route::Find(http::verb method, bool* head_as_get) const {
  *head_as_get = false;
  if (method == http::verb::unknown) return nullptr;
  for (const auto& [verb, handler] : handlers) {
    if (verb == method) return &handler;
  }
  if (method != http::verb::head || !head_allowed) return nullptr;
  for (const auto& [verb, handler] : handlers) {
    if (verb == http::verb::get) {
      *head_as_get = true;
      return &handler;
    }
  }
  return nullptr;
}

const Webserver::Impl::Route* Webserver::Impl::FindRoute(std::string_view path) const {
  for (const Route& r : routes) {  // Longest path first.
    if (r.prefix ? path.starts_with(r.path) : path == r.path) return &r;
  }
  return nullptr;
}

void Webserver::Impl::FinishRoutes() {
  std::stable_sort(routes.begin(), routes.end(), [](const Route& a, const Route& b) {
    return a.path.size() > b.path.size();
  });
  for (Route& r : routes) {
    r.allow.clear();
    bool has_head = false;
    for (const auto& entry : r.handlers) has_head |= entry.first == http::verb::head;
    for (const auto& entry : r.handlers) {
      if (!r.allow.empty()) r.allow += ", ";
      r.allow += ToStd(http::to_string(entry.first));
      if (entry.first == http::verb::get && !has_head && r.head_allowed) r.allow += ", HEAD";
    }
  }
}

bool Webserver::Impl::OwnsIoContext(const asio::io_context* ioc) const {
  for (const auto& own : iocs) {
    if (own.get() == ioc) return true;
  }
  return false;
}

asio::io_context& Webserver::Impl::NextIoContext() {
  asio::io_context& ioc = *iocs[next_ioc];
  next_ioc = (next_ioc + 1) % iocs.size();
  return ioc;
}

void Webserver::Impl::RunIoThread(int index) {
  char name[16];
  snprintf(name, sizeof(name), "http-io-%d", index);
  pthread_setname_np(pthread_self(), name);
  if (options.on_io_thread_start) options.on_io_thread_start();
  asio::io_context& ioc = *iocs[index];
  tls_io_context = &ioc;
  for (;;) {
    try {
      ioc.run();
      return;
    } catch (const std::exception& e) {
      LOG(ERROR) << "exception escaped an HTTP I/O handler: " << e.what();
    }
  }
}

void Webserver::Impl::CloseAllSessions() {
  std::vector<std::shared_ptr<SessionBase>> live;
  {
    MutexLock l(&sessions_mu);
    for (auto& entry : sessions) {
      if (auto s = entry.second.lock()) live.push_back(std::move(s));
    }
  }
  // Outside the lock: releasing the last reference runs ~Session, which takes it.
  for (auto& s : live) s->Close();
}

Webserver::Webserver(Options options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Webserver::~Webserver() { Stop(); }

Webserver::Impl::Route* Webserver::Impl::RouteFor(std::string path) {
  DCHECK(!path.empty() && path[0] == '/') << "a route must start with '/': " << path;
  {
    MutexLock l(&lifecycle_mu);
    DCHECK(state == State::kNew) << "routes are registered before Start()";
  }
  auto it = std::find_if(routes.begin(), routes.end(),
                         [&](const Route& r) { return r.path == path; });
  if (it != routes.end()) return &*it;
  Route route;
  route.prefix = path.back() == '/';
  route.path = std::move(path);
  routes.push_back(std::move(route));
  return &routes.back();
}

void Webserver::RegisterHandler(http::verb method, std::string path, HttpHandler handler) {
  Impl::Route* route = impl_->RouteFor(std::move(path));
  for (auto& entry : route->handlers) {
    if (entry.first == method) {
      entry.second = std::move(handler);
      return;
    }
  }
  route->handlers.emplace_back(method, std::move(handler));
}

void Webserver::DisallowHead(std::string path) {
  impl_->RouteFor(std::move(path))->head_allowed = false;
}

Status Webserver::Start() {
  Impl& s = *impl_;
  MutexLock l(&s.lifecycle_mu);
  if (s.state != Impl::State::kNew) {
    return AlreadyExists("the webserver was already started (it cannot be restarted)");
  }
  QR_RETURN_IF_ERROR(ValidateOptions(s.options));
  tcp::endpoint endpoint;
  QR_RETURN_IF_ERROR(ResolveBindAddress(s.options, &endpoint));
  beast::error_code ec;
  const char* step = "open";
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) {
    step = "bind";
    s.acceptor.bind(endpoint, ec);
  }
  if (!ec) {
    step = "listen";
    s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  }
  // A synchronous accept (answering a connection through the spare descriptor) must find the
  // backlog empty rather than wait.
  if (!ec) s.acceptor.non_blocking(true, ec);
  if (ec) {
    beast::error_code ignored;
    s.acceptor.close(ignored);
    return Status(StatusCode::kUnavailable, std::string("cannot ") + step + " HTTP address " +
                                                EndpointString(endpoint) + ": " + ec.message());
  }
  s.port.store(s.acceptor.local_endpoint().port(), std::memory_order_release);
  s.FinishRoutes();
  s.WarmUpIoContexts();
  if (!s.TakeSpareFd()) {
    LOG(WARNING) << "No spare file descriptor for the HTTP acceptor: out of descriptors, new "
                 << "connections will wait in the backlog instead of getting 503";
  }
  for (auto& ioc : s.iocs) s.work.push_back(asio::make_work_guard(*ioc));
  s.DoAccept();
  s.state = Impl::State::kRunning;
  for (int i = 0; i < s.options.num_threads; ++i) {
    s.threads.emplace_back([&s, i] { s.RunIoThread(i); });
  }
  LOG(INFO) << "HTTP server listening on "
            << EndpointString(tcp::endpoint(endpoint.address(), s.port.load())) << " with "
            << s.options.num_threads << " I/O threads";
  return Status::OK();
}

void Webserver::Stop() {
  Impl& s = *impl_;
  DCHECK(!s.OwnsIoContext(tls_io_context))
      << "Webserver::Stop() called from one of its HTTP I/O threads (it joins them)";
  MutexLock l(&s.lifecycle_mu);
  {
    MutexLock c(&s.control->mu);
    s.control->stopped = true;
  }
  if (s.state != Impl::State::kRunning) {
    s.state = Impl::State::kStopped;
    return;
  }
  s.state = Impl::State::kStopped;
  s.work.clear();
  for (auto& ioc : s.iocs) ioc->stop();
  for (std::thread& t : s.threads) t.join();
  s.threads.clear();
  // No I/O thread runs any more: this thread may use the acceptor and the sockets.
  beast::error_code ec;
  s.acceptor.close(ec);
  s.accept_retry_timer.cancel();
  if (s.spare_fd >= 0) close(s.spare_fd);
  s.spare_fd = -1;
  s.CloseAllSessions();
  LOG(INFO) << "HTTP server on port " << s.port.load() << " stopped";
}

bool Webserver::Drain(std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  DCHECK(!s.OwnsIoContext(tls_io_context))
      << "Webserver::Drain() called from one of its HTTP I/O threads (it waits for them)";
  const auto start = std::chrono::steady_clock::now();
  {
    MutexLock l(&s.lifecycle_mu);
    if (s.state != Impl::State::kRunning) return true;
    // seq_cst: see Impl::ConnectionClosed().
    s.draining.store(true, std::memory_order_seq_cst);
  }
  // The accept chain runs on I/O thread 0: close its socket there. A connection it accepts
  // before that closes itself when it finds the server draining.
  asio::post(*s.iocs[0], [&s] {
    beast::error_code ec;
    s.acceptor.close(ec);
    s.accept_retry_timer.cancel();
  });
  std::vector<std::shared_ptr<Impl::SessionBase>> live;
  {
    MutexLock l(&s.sessions_mu);
    for (auto& entry : s.sessions) {
      if (auto session = entry.second.lock()) live.push_back(std::move(session));
    }
  }
  const size_t draining = live.size();
  for (auto& session : live) {
    asio::post(session->executor(), [session] { session->DrainIfIdle(); });
  }
  live.clear();  // The posted handlers hold their sessions.
  bool drained = true;
  {
    MutexLock l(&s.drain_mu);
    const auto deadline = start + timeout;
    while (s.connections_open.load(std::memory_order_seq_cst) > 0) {
      if (!s.drain_cv.WaitUntil(&s.drain_mu, deadline) &&
          s.connections_open.load(std::memory_order_seq_cst) > 0) {
        drained = false;
        break;
      }
    }
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  if (drained) {
    LOG(INFO) << "HTTP server on port " << s.port.load() << " drained " << draining
              << " connections in " << ms << " ms";
  } else {
    LOG(WARNING) << "HTTP server on port " << s.port.load() << ": " << s.connections_open.load()
                 << " of " << draining << " connections still open after " << ms
                 << " ms of draining (the stop closes them)";
  }
  return drained;
}

int Webserver::port() const { return impl_->port.load(std::memory_order_acquire); }

asio::io_context& Webserver::io_context() {
  return impl_->OwnsIoContext(tls_io_context) ? *tls_io_context : *impl_->iocs[0];
}

uint64_t Webserver::responses_with_status(unsigned status) const {
  if (status < 100 || status >= impl_->responses.size()) return 0;
  return impl_->responses[status].load(std::memory_order_relaxed);
}

uint64_t Webserver::connections_accepted() const {
  return impl_->connections_accepted.load(std::memory_order_relaxed);
}

uint64_t Webserver::connections_open() const {
  return impl_->connections_open.load(std::memory_order_relaxed);
}

Status Webserver::ReplaceTlsContext(std::shared_ptr<asio::ssl::context> context) {
  if (!impl_->options.tls_context) {
    return Status(StatusCode::kNotSupported,
                  "this server speaks plain HTTP: it has no TLS context to replace");
  }
  if (!context) return InvalidArgument("no TLS context given");
  std::shared_ptr<asio::ssl::context> old;
  {
    MutexLock l(&impl_->tls_mu);
    old = std::exchange(impl_->tls_context, std::move(context));
  }
  // 'old' goes here, or with the last connection that started with it.
  return Status::OK();
}

uint64_t Webserver::connections_refused(ConnectionLimit limit) const {
  return impl_->connections_refused[static_cast<size_t>(limit)].load(std::memory_order_relaxed);
}

}  // namespace qr

