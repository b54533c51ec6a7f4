// One forwarded request (ForwardOp): connect or reuse a pooled connection, write, read, relay
// (forwarder.h says what forwarding does; forward-op.h what this file shares with it).

#include "cluster/forward-op.h"

#include <limits>
#include <optional>
#include <utility>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream_base.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <glog/logging.h>

#include "cluster/cluster-tls.h"
#include "http/webserver.h"

namespace qr {
namespace forwarding {

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
                             "TE", "Trailer", "Upgrade", "Proxy-Connection", "Expect"}) {
    if (IEquals(name, h)) return true;
  }
  return false;
}

namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;
namespace ssl = boost::asio::ssl;
using Connection = Forwarder::Connection;
using TlsStream = MaybeTlsStream::TlsStream;

/// A relayed answer may be a whole result page.
constexpr uint64_t kMaxRelayedBodyBytes = uint64_t{1} << 30;
/// The read buffer's first size: one recvmsg for answers up to this size.
constexpr size_t kFirstReadBytes = 16 * 1024;

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
          self->stream_ = self->tls_ ? std::make_unique<Connection>(self->io_, self->tls_)
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
    buffer_.clear();
    // Room for a whole typical answer: an empty flat_buffer's first read takes 512 bytes, so
    // a status answer of ~800 bytes cost two recvmsg calls.
    buffer_.reserve(kFirstReadBytes);
    if (stream_mode_) return ReadHeader();
    ReadWhole();
  }

  /// An interim answer (1xx but 101, RFC 9110 15.2) comes before the final one, which a
  /// proxy reads on to: taken for the answer, it would leave the final one in the pooled
  /// connection, read as the answer to the next request forwarded on it. The owner sends
  /// none to our requests (no Expect), but an owner behind another proxy might.
  static bool IsInterim(unsigned status) { return status >= 100 && status < 200 && status != 101; }

  /// Reads the answer whole (the bytes after an interim one are in 'buffer_' already).
  void ReadWhole() {
    parser_.emplace();
    parser_->body_limit(kMaxRelayedBodyBytes);
    stream_->Visit([this](auto& s) {
      http::async_read(s, buffer_, *parser_,
                       [self = shared_from_this()](beast::error_code ec, size_t) {
                         if (ec) return self->RetryOrFail(ec);
                         if (IsInterim(self->parser_->get().result_int())) {
                           self->interim_ = true;
                           return self->ReadWhole();
                         }
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
    stream_->Visit([this](auto& s) {
      http::async_read_header(s, buffer_, *stream_parser_,
                              [self = shared_from_this()](beast::error_code ec, size_t) {
                                if (ec) return self->RetryOrFail(ec);
                                if (IsInterim(self->stream_parser_->get().result_int())) {
                                  self->interim_ = true;
                                  return self->ReadHeader();
                                }
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
    const bool nothing_read =
        !interim_ && (stream_mode_ ? !stream_parser_ || !stream_parser_->got_some()
                                   : !parser_ || !parser_->got_some());
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
    // Bytes beyond the answer break the connection's framing: not pooled then.
    if (msg.keep_alive() && buffer_.size() == 0) PutBack();
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
  /// An interim answer was read: the owner has the request, which is not sent again.
  bool interim_ = false;
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

void StartForwardOp(std::shared_ptr<Forwarder::Pool> pool, boost::asio::io_context& io,
                    std::shared_ptr<ssl::context> tls, std::string host, std::string port,
                    http::request<http::string_body> request,
                    std::chrono::steady_clock::time_point deadline,
                    std::chrono::milliseconds bound, Forwarder::SendCallback done,
                    std::string what, bool stream) {
  auto op = std::make_shared<ForwardOp>(std::move(pool), io, std::move(tls), std::move(host),
                                        std::move(port), std::move(request), deadline, bound,
                                        std::move(done), std::move(what), stream);
  op->Start();
}

}  // namespace forwarding
}  // namespace qr
