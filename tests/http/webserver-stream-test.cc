// Streamed responses (HttpResponse::body_source): Content-Length, chunked and close-delimited
// framing, a multi-chunk body intact, back-pressure, a client gone mid-body, a source that
// fails mid-body, and the no-body rules (HEAD, 204).

#include <sys/socket.h>

#include <deque>

#include "webserver-test-util.h"

namespace qr::webserver_test {
namespace {

/// A source whose every Pull() is parked until the test answers it (from the test thread: the
/// session hands the chunk to its I/O thread), or, with 'auto_chunk' set, answered at once
/// with that chunk forever.
class ScriptedSource : public BodySource {
 public:
  void Pull(PullCallback done) override {
    std::string_view data;
    {
      MutexLock l(&mu_);
      if (pending_ != nullptr) overlapping_ = true;
      ++pulls_;
      if (auto_chunk_.empty()) {
        pending_ = std::move(done);
        cv_.NotifyAll();
        return;
      }
      data = auto_chunk_;  // Set once, never changed afterwards.
    }
    done(Chunk{data, false, false});
  }
  void Cancel() override {
    MutexLock l(&mu_);
    cancelled_ = true;
    pending_ = nullptr;
    cv_.NotifyAll();
  }

  /// Answers the parked Pull() (waiting for it first); false when none came in time.
  bool Answer(std::string data, bool last, bool failed = false) {
    PullCallback cb;
    {
      MutexLock l(&mu_);
      const auto deadline = Clock::now() + kDeadline;
      while (pending_ == nullptr) {
        if (!cv_.WaitUntil(&mu_, deadline) && pending_ == nullptr) return false;
      }
      cb = std::move(pending_);
      pending_ = nullptr;
      // Kept until the next Pull(): the previous chunk was written before it.
      chunks_.push_back(std::move(data));
      if (chunks_.size() > 2) chunks_.pop_front();
    }
    cb(Chunk{chunks_.back(), last, failed});
    return true;
  }
  void SetAutoChunk(std::string chunk) {
    MutexLock l(&mu_);
    auto_chunk_ = std::move(chunk);
  }
  bool WaitForPulls(int n) {
    MutexLock l(&mu_);
    const auto deadline = Clock::now() + kDeadline;
    while (pulls_ < n) {
      if (!cv_.WaitUntil(&mu_, deadline) && pulls_ < n) return false;
    }
    return true;
  }
  bool WaitForCancel() {
    MutexLock l(&mu_);
    const auto deadline = Clock::now() + kDeadline;
    while (!cancelled_) {
      if (!cv_.WaitUntil(&mu_, deadline) && !cancelled_) return false;
    }
    return true;
  }
  int pulls() {
    MutexLock l(&mu_);
    return pulls_;
  }
  bool cancelled() {
    MutexLock l(&mu_);
    return cancelled_;
  }
  bool overlapping() {
    MutexLock l(&mu_);
    return overlapping_;
  }
  /// The parked Pull(), if any.
  PullCallback TakePending() {
    MutexLock l(&mu_);
    return std::move(pending_);
  }

 private:
  Mutex mu_;
  CondVar cv_;
  PullCallback pending_ QR_GUARDED_BY(mu_);
  std::deque<std::string> chunks_;  // Written by the test thread only.
  std::string auto_chunk_ QR_GUARDED_BY(mu_);
  int pulls_ QR_GUARDED_BY(mu_) = 0;
  bool cancelled_ QR_GUARDED_BY(mu_) = false;
  bool overlapping_ QR_GUARDED_BY(mu_) = false;
};

/// A source that owns its one (last) chunk and that nobody but the server holds.
class OwnedSource : public BodySource {
 public:
  explicit OwnedSource(size_t size) : data_(size, 'o') {}
  void Pull(PullCallback done) override { done(Chunk{data_, true, false}); }
  void Cancel() override {}

 private:
  const std::string data_;
};

/// A raw connection that reads bytes as they come.
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawClient() { Close(); }
  bool connected() const { return connected_; }
  void Send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      data.remove_prefix(static_cast<size_t>(n));
    }
  }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  /// Reads until 'buf' holds at least 'n' bytes; false at EOF, an error or the deadline.
  bool ReadAtLeast(size_t n) {
    while (buf.size() < n) {
      if (!Fill()) return false;
    }
    return true;
  }
  /// Reads until 'buf' contains 'text'.
  bool ReadUntil(std::string_view text) {
    while (buf.find(text) == std::string::npos) {
      if (!Fill()) return false;
    }
    return true;
  }
  /// Reads to the end of the connection: true for a clean EOF, false for a reset (or the
  /// deadline, with 'timed_out' set).
  bool ReadToEnd(bool* timed_out = nullptr) {
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(kDeadline / 1ms)) <= 0) {
        if (timed_out != nullptr) *timed_out = true;
        return false;
      }
      char tmp[65536];
      ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
      if (n == 0) return true;
      if (n < 0) return false;
      buf.append(tmp, static_cast<size_t>(n));
    }
  }

  std::string buf;

 private:
  bool Fill() {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(kDeadline / 1ms)) <= 0) return false;
    char tmp[65536];
    ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buf.append(tmp, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
};

/// The head of the response in 'buf' (through the empty line), removed from it.
std::string TakeHead(std::string* buf) {
  const size_t end = buf->find("\r\n\r\n");
  if (end == std::string::npos) return std::string();
  std::string head = buf->substr(0, end + 4);
  buf->erase(0, end + 4);
  return head;
}

/// Decodes a chunked body at the start of 'in': true with the body and the bytes it took
/// when it is complete (through the last chunk and the empty trailer).
bool DecodeChunked(std::string_view in, std::string* body, size_t* used = nullptr) {
  body->clear();
  size_t pos = 0;
  for (;;) {
    const size_t eol = in.find("\r\n", pos);
    if (eol == std::string_view::npos) return false;
    const size_t size = std::stoul(std::string(in.substr(pos, eol - pos)), nullptr, 16);
    pos = eol + 2;
    if (size == 0) {
      if (in.substr(pos, 2) != "\r\n") return false;
      if (used != nullptr) *used = pos + 2;
      return true;
    }
    if (in.size() < pos + size + 2 || in.substr(pos + size, 2) != "\r\n") return false;
    body->append(in.substr(pos, size));
    pos += size + 2;
  }
}

class WebserverStreamTest : public WebserverTest {
 protected:
  void SetUp() override {
    StartServer(TestOptions(), [this](Webserver& s) {
      s.RegisterHandler(http::verb::get, "/stream", [this](HttpRequest& req,
                                                            ResponseCallback respond) {
        HttpResponse r;
        r.status = req.QueryParam("status").empty() ? 200 : std::stoi(req.QueryParam("status"));
        r.content_type = "text/plain";
        r.body_source = source();
        if (!req.QueryParam("length").empty()) r.body_length = std::stoull(req.QueryParam("length"));
        respond(std::move(r));
      });
      s.RegisterHandler(http::verb::get, "/owned", [this](HttpRequest&, ResponseCallback respond) {
        auto source = std::make_shared<OwnedSource>(kOwnedBytes);
        {
          MutexLock l(&source_mu_);
          owned_ = source;
        }
        HttpResponse r;
        r.body_source = std::move(source);
        r.body_length = kOwnedBytes;
        respond(std::move(r));
      });
    });
  }

  static constexpr size_t kOwnedBytes = 32u << 20;
  bool OwnedSourceAlive() {
    MutexLock l(&source_mu_);
    return !owned_.expired();
  }

  /// The source of the next /stream request.
  std::shared_ptr<ScriptedSource> source() {
    MutexLock l(&source_mu_);
    return source_;
  }
  void NewSource() {
    MutexLock l(&source_mu_);
    retired_.push_back(std::move(source_));
    source_ = std::make_shared<ScriptedSource>();
  }
  // The sources' chunks are read by the I/O threads' writes, which the tests know ended only
  // through the socket (invisible to TSan): they live until Stop() joined those threads.
  void TearDown() override { server_->Stop(); }

  Mutex source_mu_;
  std::vector<std::shared_ptr<ScriptedSource>> retired_ QR_GUARDED_BY(source_mu_);
  std::shared_ptr<ScriptedSource> source_ QR_GUARDED_BY(source_mu_) =
      std::make_shared<ScriptedSource>();
  std::weak_ptr<OwnedSource> owned_ QR_GUARDED_BY(source_mu_);
};

TEST_F(WebserverStreamTest, ContentLengthWhenKnownMultiChunkIntactAndKeptAlive) {
  const std::string a(70000, 'a'), b = "bbb", c(100000, 'c');
  RawClient client(server_->port());
  ASSERT_TRUE(client.connected());
  client.Send(Get("/stream?length=" + std::to_string(a.size() + b.size() + c.size())));
  ASSERT_TRUE(source()->Answer(a, false));
  ASSERT_TRUE(source()->Answer(b, false));
  ASSERT_TRUE(source()->Answer(c, true));
  ASSERT_TRUE(client.ReadUntil("\r\n\r\n"));
  const std::string head = TakeHead(&client.buf);
  EXPECT_NE(head.find("HTTP/1.1 200 OK\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("Content-Length: 170003\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("Content-Type: text/plain\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.find("Transfer-Encoding"), std::string::npos) << head;
  EXPECT_EQ(head.find("Connection: close"), std::string::npos) << head;
  ASSERT_TRUE(client.ReadAtLeast(170003));
  EXPECT_TRUE(client.buf == a + b + c);
  EXPECT_EQ(source()->pulls(), 3);
  EXPECT_FALSE(source()->cancelled());
  EXPECT_FALSE(source()->overlapping());
  // The connection serves the next request.
  client.buf.clear();
  client.Send(Get("/echo"));
  ASSERT_TRUE(client.ReadUntil("method=GET"));
}

TEST_F(WebserverStreamTest, ChunkedWhenLengthUnknown) {
  RawClient client(server_->port());
  ASSERT_TRUE(client.connected());
  client.Send(Get("/stream"));
  // The head goes with the first chunk: nothing before it.
  ASSERT_TRUE(source()->WaitForPulls(1));
  ASSERT_TRUE(source()->Answer(std::string(20, 'x'), false));
  ASSERT_TRUE(client.ReadUntil(std::string(20, 'x')));
  EXPECT_NE(client.buf.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << client.buf;
  EXPECT_EQ(client.buf.find("Content-Length"), std::string::npos) << client.buf;
  ASSERT_TRUE(source()->Answer(std::string(70000, 'y'), false));
  ASSERT_TRUE(source()->Answer("", true));  // The end alone.
  ASSERT_TRUE(client.ReadUntil("\r\n0\r\n\r\n"));
  TakeHead(&client.buf);
  std::string body;
  size_t used = 0;
  ASSERT_TRUE(DecodeChunked(client.buf, &body, &used));
  EXPECT_EQ(used, client.buf.size());
  EXPECT_TRUE(body == std::string(20, 'x') + std::string(70000, 'y'));
  client.buf.clear();
  client.Send(Get("/echo"));
  ASSERT_TRUE(client.ReadUntil("method=GET"));
}

TEST_F(WebserverStreamTest, CloseDelimitedForHttp10) {
  RawClient client(server_->port());
  ASSERT_TRUE(client.connected());
  client.Send("GET /stream HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  ASSERT_TRUE(source()->Answer("hello ", false));
  ASSERT_TRUE(source()->Answer("world", true));
  ASSERT_TRUE(client.ReadToEnd());  // A clean close ends the body.
  const std::string head = TakeHead(&client.buf);
  EXPECT_NE(head.find("Connection: close\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.find("Transfer-Encoding"), std::string::npos) << head;
  EXPECT_EQ(head.find("Content-Length"), std::string::npos) << head;
  EXPECT_EQ(client.buf, "hello world");
}

TEST_F(WebserverStreamTest, NextChunkIsPulledOnlyAfterThePreviousWasWritten) {
  // A chunk far larger than what the kernel buffers on loopback: its write cannot complete
  // before the client read most of it, and the next Pull() waits for the write.
  const size_t big = 32u << 20;
  RawClient client(server_->port());
  ASSERT_TRUE(client.connected());
  client.Send(Get("/stream?length=" + std::to_string(big + 1)));
  ASSERT_TRUE(source()->Answer(std::string(big, 'z'), false));
  ASSERT_TRUE(client.ReadAtLeast(4u << 20));
  EXPECT_EQ(source()->pulls(), 1) << "pulled again before the first chunk was written";
  ASSERT_TRUE(client.ReadUntil("\r\n\r\n"));
  const size_t head_size = client.buf.find("\r\n\r\n") + 4;
  ASSERT_TRUE(client.ReadAtLeast(head_size + big));
  ASSERT_TRUE(source()->WaitForPulls(2));
  ASSERT_TRUE(source()->Answer("!", true));
  ASSERT_TRUE(client.ReadAtLeast(head_size + big + 1));
  EXPECT_EQ(client.buf.back(), '!');
  EXPECT_FALSE(source()->overlapping());
}

TEST_F(WebserverStreamTest, ASourceLivesUntilItsLastChunkWasWritten) {
  // The server holds the only reference; the last chunk is far larger than the kernel buffers,
  // so its write is still going on while the client reads slowly.
  RawClient client(server_->port());
  ASSERT_TRUE(client.connected());
  client.Send(Get("/owned"));
  ASSERT_TRUE(client.ReadAtLeast(4u << 20));
  EXPECT_TRUE(OwnedSourceAlive()) << "released while its chunk was being written";
  ASSERT_TRUE(client.ReadUntil("\r\n\r\n"));
  const size_t head_size = client.buf.find("\r\n\r\n") + 4;
  ASSERT_TRUE(client.ReadAtLeast(head_size + kOwnedBytes));
  EXPECT_EQ(client.buf.find_first_not_of('o', head_size), std::string::npos);
  EXPECT_TRUE(WaitFor([&] { return !OwnedSourceAlive(); })) << "never released";
}

TEST_F(WebserverStreamTest, ClientGoneMidBodyCancelsTheSource) {
  RawClient client(server_->port());
  ASSERT_TRUE(client.connected());
  client.Send(Get("/stream"));
  ASSERT_TRUE(source()->Answer("first", false));
  ASSERT_TRUE(client.ReadUntil("first"));
  client.Close();
  // The next writes fail once the peer's reset came back; the source hears of it.
  source()->SetAutoChunk(std::string(1 << 20, 'q'));
  ASSERT_TRUE(source()->WaitForPulls(2));
  if (BodySource::PullCallback cb = source()->TakePending()) {
    cb(BodySource::Chunk{"more", false, false});
  }
  EXPECT_TRUE(source()->WaitForCancel());
  // The server serves on.
  EXPECT_EQ(OneShot(Get("/echo")).status, 200);
}

TEST_F(WebserverStreamTest, FailureMidBodyNeverLooksComplete) {
  {  // Content-Length: fewer bytes, then the connection ends.
    RawClient client(server_->port());
    ASSERT_TRUE(client.connected());
    client.Send(Get("/stream?length=100"));
    ASSERT_TRUE(source()->Answer("0123456789", false));
    ASSERT_TRUE(client.ReadUntil("0123456789"));
    ASSERT_TRUE(source()->Answer("", false, /*failed=*/true));
    bool timed_out = false;
    client.ReadToEnd(&timed_out);
    ASSERT_FALSE(timed_out);
    TakeHead(&client.buf);
    EXPECT_EQ(client.buf, "0123456789");
  }
  NewSource();
  {  // Chunked: no last chunk.
    RawClient client(server_->port());
    ASSERT_TRUE(client.connected());
    client.Send(Get("/stream"));
    ASSERT_TRUE(source()->Answer("0123456789", false));
    ASSERT_TRUE(client.ReadUntil("0123456789"));
    ASSERT_TRUE(source()->Answer("", false, /*failed=*/true));
    bool timed_out = false;
    client.ReadToEnd(&timed_out);
    ASSERT_FALSE(timed_out);
    TakeHead(&client.buf);
    std::string body;
    EXPECT_FALSE(DecodeChunked(client.buf, &body)) << client.buf;
    EXPECT_EQ(client.buf.find("0\r\n\r\n"), std::string::npos) << client.buf;
  }
  NewSource();
  {  // Close-delimited (HTTP/1.0): a reset, not a clean end.
    RawClient client(server_->port());
    ASSERT_TRUE(client.connected());
    client.Send("GET /stream HTTP/1.0\r\n\r\n");
    ASSERT_TRUE(source()->Answer("0123456789", false));
    ASSERT_TRUE(client.ReadUntil("0123456789"));
    ASSERT_TRUE(source()->Answer("", false, /*failed=*/true));
    bool timed_out = false;
    EXPECT_FALSE(client.ReadToEnd(&timed_out)) << "a clean EOF would end the body as complete";
    EXPECT_FALSE(timed_out);
  }
  NewSource();
  {  // More bytes than announced: cut at the announcement, never more.
    RawClient client(server_->port());
    ASSERT_TRUE(client.connected());
    client.Send(Get("/stream?length=4"));
    ASSERT_TRUE(source()->Answer("0123456789", false));
    bool timed_out = false;
    client.ReadToEnd(&timed_out);
    ASSERT_FALSE(timed_out);
    TakeHead(&client.buf);
    EXPECT_EQ(client.buf, "");
    EXPECT_TRUE(source()->cancelled());
  }
}

TEST_F(WebserverStreamTest, NoBodyForHeadAnd204) {
  RawClient client(server_->port());
  ASSERT_TRUE(client.connected());
  client.Send("HEAD /stream?length=5 HTTP/1.1\r\nHost: test\r\n\r\n");
  ASSERT_TRUE(source()->WaitForCancel());
  EXPECT_EQ(source()->pulls(), 0);
  NewSource();
  client.Send(Get("/stream?status=204"));
  ASSERT_TRUE(source()->WaitForCancel());
  EXPECT_EQ(source()->pulls(), 0);
  client.Send(Get("/echo"));
  ASSERT_TRUE(client.ReadUntil("method=GET"));
  const std::string head = TakeHead(&client.buf);
  EXPECT_NE(head.find("Content-Length: 5\r\n"), std::string::npos) << head;
  const std::string head204 = TakeHead(&client.buf);
  EXPECT_NE(head204.find("HTTP/1.1 204"), std::string::npos) << head204;
  EXPECT_EQ(head204.find("Content-Length"), std::string::npos) << head204;
  EXPECT_EQ(head204.find("Transfer-Encoding"), std::string::npos) << head204;
  EXPECT_EQ(client.buf.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << client.buf;
}

}  // namespace
}  // namespace qr::webserver_test
