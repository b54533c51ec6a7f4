#include "cluster/forwarder.h"

#include <ctime>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream_base.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <glog/logging.h>

#include "cluster/cluster-tls.h"
#include "cluster/forward-auth.h"
#include "cluster/maybe-tls-stream.h"
#include "util/mutex.h"

namespace qr {

namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;
namespace ssl = boost::asio::ssl;

namespace {

/// A relayed answer may be a whole result page.
constexpr uint64_t kMaxRelayedBodyBytes = uint64_t{1} << 30;
/// The read buffer's first size: one recvmsg for answers up to this size.
constexpr size_t kFirstReadBytes = 16 * 1024;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string FormatTime(int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

/// Headers that belong to one hop (RFC 9110 7.6.1) or that the server sets itself.
bool IsHopHeader(std::string_view name) {
  for (std::string_view h : {"Connection", "Keep-Alive", "Transfer-Encoding", "Content-Length",
                             "TE", "Trailer", "Upgrade", "Proxy-Connection"}) {
    if (IEquals(name, h)) return true;
  }
  return false;
}

bool IsClusterHeader(std::string_view name) {
  return IEquals(name, kForwardedByHeader) || IEquals(name, kForwardedProtoHeader) ||
         IEquals(name, kForwardedPrincipalHeader) || IEquals(name, kForwardedClientHeader);
}

/// "http[s]://host:port[/]" -> TLS or not, host, port. False for another scheme or no port.
bool SplitMemberUri(std::string_view uri, bool* tls, std::string* host, std::string* port) {
  constexpr std::string_view kHttp = "http://", kHttps = "https://";
  *tls = uri.substr(0, kHttps.size()) == kHttps;
  if (!*tls && uri.substr(0, kHttp.size()) != kHttp) return false;
  uri.remove_prefix(*tls ? kHttps.size() : kHttp.size());
  uri = uri.substr(0, uri.find('/'));
  const size_t colon = uri.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == uri.size()) return false;
  std::string_view h = uri.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h.empty()) return false;
  *host = std::string(h);
  *port = std::string(uri.substr(colon + 1));
  return true;
}

using TlsStream = MaybeTlsStream::TlsStream;

}  // namespace

/// A connection to a member, plain or TLS (its advertised URI's scheme).
class Forwarder::Connection : public MaybeTlsStream {
 public:
  using MaybeTlsStream::MaybeTlsStream;
};

RouteDecision DecideRoute(uint32_t owner, uint32_t self, bool already_forwarded,
                          const MemberLookup& lookup) {
  RouteDecision d;
  if (owner == 0 || owner == self || already_forwarded) return d;
  DepartedMember departed;
  if (lookup(owner, &d.member, &departed)) {
    d.kind = RouteDecision::Kind::kForward;
    return d;
  }
  d.kind = RouteDecision::Kind::kGone;
  d.member = std::move(departed.member);
  d.member.id = owner;
  d.gone_since_ms = departed.gone_since_ms;
  return d;
}

std::string RemoteHostGoneMessage(const UniqueId& id, const RouteDecision& d,
                                  const std::string& cluster_name) {
  std::string msg = "Query " + PrintId(id) + " belongs to coordinator member " +
                    std::to_string(d.member.id) + " of cluster '" + cluster_name + "'";
  if (d.gone_since_ms > 0) {
    msg += " (last at " + d.member.uri + "), which is gone since " +
           FormatTime(d.gone_since_ms) + ": its etcd lease expired or was revoked";
  } else {
    msg += ", which is not a live member (this coordinator has not seen it since it joined)";
  }
  return msg;
}

const char* Forwarder::ResultName(int result) {
  switch (result) {
    case kOk: return "ok";
    case kGone: return "gone";
    case kTimeout: return "timeout";
    default: return "error";
  }
}

/// The idle connections per member and the counters; shared with the operations in flight,
/// which may end after the Forwarder is gone.
struct Forwarder::Pool {
  explicit Pool(size_t max_idle) : max_idle(max_idle) {}

  std::unique_ptr<Connection> Take(const std::string& key) QR_EXCLUDES(mu) {
    MutexLock l(&mu);
    auto it = idle.find(key);
    if (it == idle.end() || it->second.empty()) return nullptr;
    std::unique_ptr<Connection> s = std::move(it->second.back());
    it->second.pop_back();
    return s;
  }

  void Put(const std::string& key, std::unique_ptr<Connection> s) QR_EXCLUDES(mu) {
    MutexLock l(&mu);
    std::vector<std::unique_ptr<Connection>>& v = idle[key];
    if (closed || v.size() >= max_idle) return;  // 's' closes as it goes
    v.push_back(std::move(s));
  }

  /// Counts a request answered without a hop (the owner is gone): no latency.
  void RecordNoHop(int result) { results[result].fetch_add(1, std::memory_order_relaxed); }

  void Record(int result, std::chrono::steady_clock::duration took) {
    results[result].fetch_add(1, std::memory_order_relaxed);
    const double s = std::chrono::duration<double>(took).count();
    for (size_t i = 0; i < kLatencyBucketsSeconds.size(); ++i) {
      if (s <= kLatencyBucketsSeconds[i]) buckets[i].fetch_add(1, std::memory_order_relaxed);
    }
    buckets.back().fetch_add(1, std::memory_order_relaxed);
    latency_us.fetch_add(static_cast<int64_t>(s * 1e6), std::memory_order_relaxed);
  }

  const size_t max_idle;
  mutable Mutex mu;
  bool closed QR_GUARDED_BY(mu) = false;
  std::map<std::string, std::vector<std::unique_ptr<Connection>>> idle QR_GUARDED_BY(mu);
  std::array<std::atomic<int64_t>, kNumResults> results{};
  std::array<std::atomic<int64_t>, kLatencyBucketsSeconds.size() + 1> buckets{};
  std::atomic<int64_t> latency_us{0};
  std::atomic<int64_t> busy{0};
  std::atomic<int64_t> opened{0};
  std::atomic<int64_t> bytes_relayed{0};
};

namespace {

using Connection = Forwarder::Connection;

/// The status and end-to-end headers of the owner's answer 'msg'.
HttpResponse RelayedHead(const http::response_header<>& msg) {
  HttpResponse resp;
  resp.status = msg.result_int();
  resp.content_type.clear();
  for (const auto& f : msg) {
    const std::string_view name(f.name_string().data(), f.name_string().size());
    const std::string value(f.value().data(), f.value().size());
    if (IsHopHeader(name) || IEquals(name, "Server") || IEquals(name, "Date")) {
      continue;
    }
    if (IEquals(name, "Content-Type")) {
      resp.content_type = value;
    } else {
      resp.headers.emplace_back(std::string(name), value);
    }
  }
  return resp;
}

/// One forwarded request: connect (or reuse), write, read, relay. Each step is bounded by
/// the deadline; the handlers keep the operation alive. Its connections are pooled per member
/// and io_context, so everything it does (and a reused stream's handlers) runs on the I/O
/// thread that received the request, and no socket outlives its io_context's neighbours.
/// A streamed one ('stream') is also its answer's BodySource: after the owner's header, each
/// Pull() reads at most kRelayChunkBytes of body, bounded by 'bound' from the read's start.
class ForwardOp : public BodySource, public std::enable_shared_from_this<ForwardOp> {
 public:
  /// 'tls': the TLS context of an https:// member (null for http://).
  ForwardOp(std::shared_ptr<Forwarder::Pool> pool, boost::asio::io_context& io,
            std::shared_ptr<ssl::context> tls, std::string host, std::string port,
            http::request<http::string_body> request,
            std::chrono::steady_clock::time_point deadline, std::chrono::milliseconds bound,
            Forwarder::SendCallback done, std::string what, bool stream)
      : pool_(std::move(pool)), io_(io), tls_(std::move(tls)), resolver_(io),
        host_(std::move(host)), port_(std::move(port)),
        key_(std::string(tls_ ? "https://" : "http://") + host_ + ":" + port_ + "@" +
             std::to_string(reinterpret_cast<uintptr_t>(&io))),
        request_(std::move(request)),
        deadline_(deadline), bound_(bound), done_(std::move(done)), what_(std::move(what)),
        stream_mode_(stream) {}

  ~ForwardOp() override { Release(); }

  void Pull(PullCallback done) override {
    pull_ = std::move(done);
    ReadBody();
  }

  void Cancel() override {
    // The client is gone: the rest of the body is not read, and the connection (in the middle
    // of an answer) is closed, never pooled. A pending read ends with an error.
    cancelled_ = true;
    pull_ = nullptr;
    beast::error_code ignored;
    if (stream_ != nullptr) stream_->tcp().socket().close(ignored);
  }

  void Start() {
    stream_ = pool_->Take(key_);
    if (stream_ == nullptr) return Connect();
    pool_->busy.fetch_add(1, std::memory_order_relaxed);
    reused_ = true;
    Write();
  }

 private:
  void Connect() {
    reused_ = false;
    resolver_.async_resolve(
        host_, port_, [self = shared_from_this()](beast::error_code ec,
                                                   tcp::resolver::results_type results) {
          if (ec) return self->Fail(ec);
          self->stream_ = self->tls_ ? std::make_unique<Connection>(self->io_, *self->tls_)
                                     : std::make_unique<Connection>(self->io_);
          self->pool_->busy.fetch_add(1, std::memory_order_relaxed);
          self->stream_->tcp().expires_at(self->deadline_);
          self->stream_->tcp().async_connect(
              results, [self](beast::error_code ec, const tcp::endpoint&) {
                if (ec) return self->Fail(ec);
                self->pool_->opened.fetch_add(1, std::memory_order_relaxed);
                if (self->stream_->tls() != nullptr) return self->Handshake();
                self->Write();
              });
        });
  }

  /// TLS: the member's certificate must chain to the CA (--cluster_ca_file) and match the
  /// host of its advertised URI; anything else fails the request.
  void Handshake() {
    TlsStream& s = *stream_->tls();
    if (!SetTlsPeerName(s.native_handle(), host_)) {
      return Fail(boost::asio::error::invalid_argument, "TLS: bad peer name '" + host_ + "'");
    }
    s.async_handshake(ssl::stream_base::client,
                      [self = shared_from_this()](beast::error_code ec) {
                        if (ec == beast::error::timeout) return self->Fail(ec);
                        if (ec) {
                          return self->Fail(
                              ec, "TLS handshake failed: " +
                                      TlsHandshakeFailure(self->stream_->tls()->native_handle(),
                                                          ec.message()));
                        }
                        self->Write();
                      });
  }

  void Write() {
    stream_->tcp().expires_at(deadline_);
    stream_->Visit([this](auto& s) {
      http::async_write(s, request_, [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec) return self->RetryOrFail(ec);
        self->Read();
      });
    });
  }

  void Read() {
    if (stream_mode_) return ReadHeader();
    parser_.emplace();
    parser_->body_limit(kMaxRelayedBodyBytes);
    buffer_.clear();
    // Room for a whole typical answer: an empty flat_buffer's first read takes 512 bytes, so
    // a status answer of ~800 bytes cost two recvmsg calls.
    buffer_.reserve(kFirstReadBytes);
    stream_->Visit([this](auto& s) {
      http::async_read(s, buffer_, *parser_,
                       [self = shared_from_this()](beast::error_code ec, size_t) {
                         if (ec) return self->RetryOrFail(ec);
                         self->Relay();
                       });
    });
  }

  void ReadHeader() {
    stream_parser_.emplace();
    // Streamed: nothing is held but one chunk. (Not boost::none: Boost 1.74 compares a
    // Content-Length against it as against a value below every length.)
    stream_parser_->body_limit(std::numeric_limits<uint64_t>::max());
    stream_parser_->eager(true);
    if (request_.method() == http::verb::head) stream_parser_->skip(true);
    buffer_.clear();
    buffer_.reserve(kFirstReadBytes);
    stream_->Visit([this](auto& s) {
      http::async_read_header(s, buffer_, *stream_parser_,
                              [self = shared_from_this()](beast::error_code ec, size_t) {
                                if (ec) return self->RetryOrFail(ec);
                                self->RelayHeader();
                              });
    });
  }

  /// The owner's header arrived: answers at once, with the body whole when it came with the
  /// header (one write to the client, as before streaming), else streamed from here.
  void RelayHeader() {
    http::response_parser<http::buffer_body>& p = *stream_parser_;
    HttpResponse resp = RelayedHead(p.get());
    const bool keep = p.get().keep_alive();
    const boost::optional<uint64_t> length = p.content_length();
    if (p.is_done() || (length && *length <= buffer_.size())) {
      const size_t n = p.is_done() ? 0 : static_cast<size_t>(*length);
      resp.body.assign(static_cast<const char*>(buffer_.data().data()), n);
      pool_->bytes_relayed.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
      // Bytes beyond the answer break the connection's framing: not pooled then.
      if (keep && buffer_.size() == n) PutBack();
      return done_(Forwarder::kOk, std::move(resp), std::string());
    }
    if (length) resp.body_length = *length;
    chunk_ = std::make_unique<char[]>(Forwarder::kRelayChunkBytes);
    resp.body_source = shared_from_this();
    done_(Forwarder::kOk, std::move(resp), std::string());
  }

  void ReadBody() {
    http::buffer_body::value_type& body = stream_parser_->get().body();
    body.data = chunk_.get();
    body.size = Forwarder::kRelayChunkBytes;
    body.more = true;
    // An idle bound per read: a stalled owner fails the relay, a slow but steady one not.
    stream_->tcp().expires_after(bound_);
    stream_->Visit([this](auto& s) {
      http::async_read_some(s, buffer_, *stream_parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              self->OnBody(ec);
                            });
    });
  }

  void OnBody(beast::error_code ec) {
    if (cancelled_) return;
    if (ec == http::error::need_buffer) ec = {};  // The chunk is full.
    if (ec) {
      const bool timeout = ec == beast::error::timeout;
      LOG(WARNING) << "Forwarding " << request_.method_string() << " " << request_.target()
                   << ": " << what_
                   << (timeout ? ", stalled mid-answer for " + std::to_string(bound_.count()) +
                                     " ms"
                               : ", failed mid-answer: " + ec.message())
                   << "; the relayed answer is cut short";
      Release();
      return std::exchange(pull_, nullptr)(Chunk{{}, false, true});
    }
    const size_t n = Forwarder::kRelayChunkBytes - stream_parser_->get().body().size;
    const bool last = stream_parser_->is_done();
    if (n == 0 && !last) return ReadBody();  // Framing only (a chunk header).
    pool_->bytes_relayed.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
    if (last) {
      if (stream_parser_->get().keep_alive() && buffer_.size() == 0) {
        PutBack();
      } else {
        Release();
      }
    }
    std::exchange(pull_, nullptr)(Chunk{std::string_view(chunk_.get(), n), last, false});
  }

  /// The answer was read whole and the owner keeps the connection: back to the pool.
  void PutBack() {
    if (stream_ == nullptr) return;
    pool_->busy.fetch_sub(1, std::memory_order_relaxed);
    pool_->Put(key_, std::move(stream_));
  }

  /// A pooled connection the owner closed while idle fails before any answer: once, the
  /// request goes again on a fresh connection.
  void RetryOrFail(beast::error_code ec) {
    const bool nothing_read = stream_mode_ ? !stream_parser_ || !stream_parser_->got_some()
                                           : !parser_ || !parser_->got_some();
    if (reused_ && nothing_read && ec != beast::error::timeout) {
      Release();
      return Connect();
    }
    Fail(ec);
  }

  void Relay() {
    http::response<http::string_body> msg = parser_->release();
    HttpResponse resp = RelayedHead(msg);
    resp.body = std::move(msg.body());
    if (msg.keep_alive()) PutBack();
    done_(Forwarder::kOk, std::move(resp), std::string());
  }

  /// 'why' (default: 'ec''s message) says what went wrong.
  void Fail(beast::error_code ec, const std::string& why = std::string()) {
    const bool timeout = ec == beast::error::timeout;
    const std::string msg =
        what_ + (timeout ? ", did not answer within " + std::to_string(bound_.count()) + " ms"
                         : ", could not be reached: " + (why.empty() ? ec.message() : why));
    LOG(WARNING) << "Forwarding " << request_.method_string() << " " << request_.target()
                 << ": " << msg;
    Release();
    done_(timeout ? Forwarder::kTimeout : Forwarder::kError, HttpResponse(), msg);
  }

  void Release() {
    if (stream_ == nullptr) return;
    pool_->busy.fetch_sub(1, std::memory_order_relaxed);
    beast::error_code ignored;
    stream_->tcp().socket().close(ignored);
    stream_.reset();
  }

  const std::shared_ptr<Forwarder::Pool> pool_;
  boost::asio::io_context& io_;
  const std::shared_ptr<ssl::context> tls_;
  tcp::resolver resolver_;
  const std::string host_;
  const std::string port_;
  const std::string key_;
  http::request<http::string_body> request_;
  const std::chrono::steady_clock::time_point deadline_;
  const std::chrono::milliseconds bound_;
  const Forwarder::SendCallback done_;
  const std::string what_;
  std::unique_ptr<Connection> stream_;
  bool reused_ = false;
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::string_body>> parser_;
  // A streamed answer: its parser, the chunk it reads into, the Pull() waiting for it.
  const bool stream_mode_;
  std::optional<http::response_parser<http::buffer_body>> stream_parser_;
  std::unique_ptr<char[]> chunk_;
  PullCallback pull_;
  bool cancelled_ = false;
};

}  // namespace

Forwarder::Forwarder(Options options)
    : options_(std::move(options)), pool_(std::make_shared<Pool>(options_.max_idle_per_member)) {}

Forwarder::~Forwarder() { Close(); }

void Forwarder::Close() {
  std::map<std::string, std::vector<std::unique_ptr<Connection>>> idle;
  {
    MutexLock l(&pool_->mu);
    pool_->closed = true;
    idle.swap(pool_->idle);
  }
  // 'idle' closes its sockets here, outside the lock.
}

bool Forwarder::MaybeForward(const UniqueId& id, const HttpRequest& req,
                             std::chrono::milliseconds extra_wait, const GoneRenderer& gone,
                             boost::asio::io_context& io, ResponseCallback& respond) {
  const Membership* membership = membership_.load(std::memory_order_acquire);
  if (membership == nullptr) return false;
  const uint32_t self = membership->member_id();
  const RouteDecision d = DecideRoute(
      QueryOwner(id), self, !req.Header(kForwardedByHeader).empty(),
      [membership](uint32_t member, ClusterMember* live, DepartedMember* departed) {
        return membership->LookupMember(member, live, departed);
      });
  if (d.kind == RouteDecision::Kind::kLocal) return false;
  if (d.kind == RouteDecision::Kind::kGone) {
    pool_->RecordNoHop(kGone);
    respond(gone(RemoteHostGoneMessage(id, d, options_.cluster_name)));
    return true;
  }
  Forward(d.member, id, req, extra_wait, gone, io, std::move(respond));
  return true;
}

void Forwarder::Forward(const ClusterMember& owner, const UniqueId& id, const HttpRequest& req,
                        std::chrono::milliseconds extra_wait, const GoneRenderer& gone,
                        boost::asio::io_context& io, ResponseCallback respond) {
  const std::string what = "Query " + PrintId(id) + "'s coordinator, member " +
                           std::to_string(owner.id) + " at " + owner.uri;
  bool tls = false;
  std::string host, port;
  if (std::string why; !CheckMemberUri(owner.uri, &tls, &host, &port, &why)) {
    LOG(WARNING) << what << " cannot be forwarded to: " << why;
    pool_->RecordNoHop(kError);
    respond(gone(what + ", cannot be forwarded to: " + why));
    return;
  }
  http::request<http::string_body> out;
  if (req.method != http::verb::unknown) {
    out.method(req.method);
  } else {
    out.method_string(req.method_string);
  }
  out.target(req.target);
  out.version(11);
  for (const auto& f : req.headers) {
    const std::string_view name(f.name_string().data(), f.name_string().size());
    if (IsHopHeader(name) || IsClusterHeader(name)) continue;
    out.insert(f.name_string(), f.value());
  }
  if (out.find(http::field::host) == out.end()) {
    out.set(http::field::host, !req.absolute_authority.empty() ? req.absolute_authority
                                                                : host + ":" + port);
  }
  out.set(std::string(kForwardedProtoHeader), req.secure ? "https" : "http");
  if (!options_.secret.empty()) {
    // The owner logs and limits the client, not this member (forward-auth.h).
    out.set(std::string(kForwardedClientHeader),
            SignForwardedClient(options_.secret, req.remote_address, req.method_string,
                                req.target, NowMs()));
  }
  out.body() = req.body;
  const std::chrono::milliseconds bound = options_.timeout + extra_wait;
  const auto started = std::chrono::steady_clock::now();
  Start(tls, std::move(host), std::move(port), std::move(out), req.authenticated_user, bound, io,
        [pool = pool_, gone, respond = std::move(respond), started](
            int result, HttpResponse resp, std::string error) {
          pool->Record(result, std::chrono::steady_clock::now() - started);
          respond(result == kOk ? std::move(resp) : gone(error));
        },
        what, /*stream=*/true);
}

bool Forwarder::CheckMemberUri(const std::string& uri, bool* tls, std::string* host,
                               std::string* port, std::string* why) const {
  if (!SplitMemberUri(uri, tls, host, port)) {
    *why = "only http:// and https:// advertised URIs with a port are supported";
    return false;
  }
  if (*tls && options_.tls_context == nullptr) {
    *why = "https:// needs a TLS client context (--cluster_ca_file)";
    return false;
  }
  return true;
}

void Forwarder::Start(bool tls, std::string host, std::string port, http::request<http::string_body> out,
                      const std::string& principal, std::chrono::milliseconds bound,
                      boost::asio::io_context& io, SendCallback done, std::string what,
                      bool stream) {
  const uint32_t self = [this] {
    const Membership* m = membership_.load(std::memory_order_acquire);
    return m != nullptr ? m->member_id() : 0u;
  }();
  out.set(std::string(kForwardedByHeader), std::to_string(self));
  if (options_.authentication && !options_.secret.empty() && !principal.empty()) {
    out.set(std::string(kForwardedPrincipalHeader),
            SignForwardedPrincipal(
                options_.secret, principal,
                std::string_view(out.method_string().data(), out.method_string().size()),
                std::string_view(out.target().data(), out.target().size()), NowMs()));
  }
  out.prepare_payload();
  out.keep_alive(true);
  auto op = std::make_shared<ForwardOp>(pool_, io, tls ? options_.tls_context : nullptr,
                                        std::move(host), std::move(port),
                                        std::move(out), std::chrono::steady_clock::now() + bound,
                                        bound, std::move(done), std::move(what), stream);
  op->Start();
}

void Forwarder::Send(const ClusterMember& member, const Outgoing& request,
                     std::chrono::milliseconds bound, boost::asio::io_context& io,
                     SendCallback done) {
  const std::string what = "Coordinator member " + std::to_string(member.id) + " at " +
                           member.uri;
  bool tls = false;
  std::string host, port;
  if (std::string why; !CheckMemberUri(member.uri, &tls, &host, &port, &why)) {
    done(kError, HttpResponse(), what + " cannot be asked: " + why);
    return;
  }
  http::request<http::string_body> out;
  out.method_string(request.method);
  out.target(request.target);
  out.version(11);
  for (const auto& [name, value] : request.headers) {
    if (IsHopHeader(name) || IsClusterHeader(name)) continue;
    out.insert(name, value);
  }
  if (out.find(http::field::host) == out.end()) out.set(http::field::host, host + ":" + port);
  out.set(std::string(kForwardedProtoHeader), request.secure ? "https" : "http");
  out.body() = request.body;
  // On the io_context's own thread, as a forwarded request's operation runs.
  boost::asio::post(io, [this, tls, host = std::move(host), port = std::move(port),
                         out = std::move(out), principal = request.principal, bound, &io,
                         done = std::move(done), what]() mutable {
    Start(tls, std::move(host), std::move(port), std::move(out), principal, bound, io,
          std::move(done), what, /*stream=*/false);
  });
}

Forwarder::Stats Forwarder::GetStats() const {
  Stats s;
  for (int i = 0; i < kNumResults; ++i) s.results[i] = pool_->results[i].load();
  for (size_t i = 0; i < s.latency_buckets.size(); ++i) {
    s.latency_buckets[i] = pool_->buckets[i].load();
  }
  s.latency_seconds_sum = static_cast<double>(pool_->latency_us.load()) / 1e6;
  s.connections_busy = pool_->busy.load();
  s.connections_opened = pool_->opened.load();
  s.bytes_relayed = pool_->bytes_relayed.load();
  MutexLock l(&pool_->mu);
  for (const auto& [key, v] : pool_->idle) s.connections_idle += static_cast<int64_t>(v.size());
  return s;
}

}  // namespace qr
