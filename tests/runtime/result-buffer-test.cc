#include "runtime/result-buffer.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

namespace qr {
namespace {

ResultPage Page(int rows, const std::string& text) {
  return ResultPage{std::make_shared<const std::string>(text), rows, static_cast<int64_t>(rows) * 8};
}

TEST(ResultBufferTest, DeliversColumnsPagesThenEnd) {
  std::atomic<int> changes{0};
  ResultBuffer buf(100, 1000, [&] { changes.fetch_add(1); });
  EXPECT_EQ(buf.columns(), nullptr);
  buf.SetColumns({Column{"x", "bigint", R"({"rawType":"bigint","arguments":[]})"}});
  ASSERT_NE(buf.columns(), nullptr);
  EXPECT_EQ(buf.columns()->at(0).name, "x");
  ResultPage p;
  std::optional<QueryError> err;
  EXPECT_EQ(buf.TryGet(&p, &err), ResultBuffer::Next::kNotYet);
  ASSERT_TRUE(buf.Put(Page(2, "[1],[2]")));
  EXPECT_EQ(buf.buffered_rows(), 2);
  buf.Finish(std::nullopt);
  EXPECT_EQ(buf.TryGet(&p, &err), ResultBuffer::Next::kPage) << "pages come before the end";
  EXPECT_EQ(*p.json_rows, "[1],[2]");
  EXPECT_EQ(buf.TryGet(&p, &err), ResultBuffer::Next::kEnd);
  EXPECT_FALSE(err.has_value());
  EXPECT_EQ(changes.load(), 3);
}

TEST(ResultBufferTest, EndCarriesTheError) {
  ResultBuffer buf(10, 100);
  buf.Finish(QueryError::TableNotFound("no such table: t"));
  buf.Finish(std::nullopt);  // ignored
  ResultPage p;
  std::optional<QueryError> err;
  ASSERT_EQ(buf.TryGet(&p, &err), ResultBuffer::Next::kEnd);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->code, 46);
}

TEST(ResultBufferTest, ProducerBlocksWhileFullAndResumesWhenDrained) {
  ResultBuffer buf(4, 1 << 20);
  std::atomic<int> put{0};
  std::thread producer([&] {
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(buf.Put(Page(2, "[0],[0]")));
      put.fetch_add(1);
    }
    buf.Finish(std::nullopt);
  });
  // The producer fills two pages (4 rows) and then must wait for the consumer.
  while (put.load() < 2) std::this_thread::yield();
  EXPECT_LE(buf.buffered_rows(), 4);
  int pages = 0;
  ResultPage p;
  std::optional<QueryError> err;
  while (true) {
    ResultBuffer::Next n = buf.TryGet(&p, &err);
    if (n == ResultBuffer::Next::kEnd) break;
    if (n == ResultBuffer::Next::kPage) ++pages;
    EXPECT_LE(buf.buffered_rows(), 4);
    std::this_thread::yield();
  }
  producer.join();
  EXPECT_EQ(pages, 10);
  EXPECT_LE(buf.peak_buffered_bytes(), 2 * 7);
}

TEST(ResultBufferTest, OversizedPageIsAcceptedWhenEmpty) {
  ResultBuffer buf(1, 4);
  EXPECT_TRUE(buf.Put(Page(3, "[1],[2],[3]")));
  EXPECT_EQ(buf.buffered_rows(), 3);
}

TEST(ResultBufferTest, CloseUnblocksTheProducerAndRefusesPages) {
  ResultBuffer buf(1, 1 << 20);
  ASSERT_TRUE(buf.Put(Page(1, "[1]")));
  std::atomic<bool> returned{false};
  std::atomic<bool> result{true};
  std::thread producer([&] {
    result.store(buf.Put(Page(1, "[2]")));
    returned.store(true);
  });
  buf.Close();
  producer.join();
  EXPECT_TRUE(returned.load());
  EXPECT_FALSE(result.load());
  EXPECT_EQ(buf.buffered_rows(), 0);
  EXPECT_FALSE(buf.Put(Page(1, "[3]")));
}

}  // namespace
}  // namespace qr
