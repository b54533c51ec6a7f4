#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/query-error.h"
#include "util/mutex.h"
#include "util/thread-annotations.h"

namespace qr {

/// One result column, already in Trino terms.
struct Column {
  std::string name;
  /// SQL type name, e.g. "bigint", "varchar".
  std::string type;
  /// The typeSignature object as JSON text, e.g. {"rawType":"bigint","arguments":[]}.
  std::string type_signature_json;
};

/// A page of rows already encoded as JSON: the text that goes between the brackets of
/// "data":[...], e.g. [1,"a"],[2,"b"]. Immutable and shared: a retried GET of the same token
/// sends the same buffer again, never a copy.
struct ResultPage {
  std::shared_ptr<const std::string> json_rows;
  int64_t num_rows = 0;
  /// Bytes of the values (TEXT/BLOB lengths, 8 per number), for processedBytes.
  int64_t num_bytes = 0;
};

/// The bounded channel between the executor thread producing a query's rows and the
/// coordinator handing them to the client.
///
/// The producer blocks in Put() while the buffer holds 'max_rows' rows or 'max_bytes' JSON bytes
/// (backpressure: an unread huge result never sits in memory); a single page larger than the
/// limits is still accepted when the buffer is empty. The consumer never blocks: TryGet()
/// answers at once, and the change listener tells it when to try again.
/// Thread-safety: thread-safe; one producer thread and any number of consumer threads.
class ResultBuffer {
 public:
  /// 'on_change' is called, with no lock held, after columns arrive, a page arrives, or the
  /// producer finishes. It may be called from the producer thread; keep it short.
  ResultBuffer(int64_t max_rows, int64_t max_bytes, std::function<void()> on_change = nullptr);

  /// Replaces the change listener. Call before the producer starts.
  void SetOnChange(std::function<void()> on_change);

  // Producer side.
  /// Sets the result columns; called once, before the first Put().
  void SetColumns(std::vector<Column> columns);
  /// Appends a page, blocking while the buffer is full. Returns false (dropping the page) once
  /// Close() has been called: the producer must stop.
  bool Put(ResultPage page);
  /// Ends the stream: success when 'error' is empty. Later calls are ignored.
  void Finish(std::optional<QueryError> error);

  // Consumer side.
  enum class Next { kPage, kNotYet, kEnd };
  /// Takes the oldest page if there is one (kPage). Otherwise kEnd once the producer finished
  /// (the error, if any, in 'error'), or kNotYet.
  Next TryGet(ResultPage* page, std::optional<QueryError>* error);
  /// The columns once known, else nullptr. The pointer stays valid for the buffer's life.
  const std::vector<Column>* columns() const;
  /// Drops buffered pages and makes every later Put() return false (and unblocks a waiting one).
  void Close();

  int64_t buffered_rows() const;
  int64_t buffered_bytes() const;
  /// Highest buffered_bytes() ever observed (for tests of the backpressure limit).
  int64_t peak_buffered_bytes() const;
  bool finished() const;

 private:
  void NotifyChange();

  const int64_t max_rows_;
  const int64_t max_bytes_;
  /// Protects everything below, and is held only for O(1) work.
  mutable Mutex lock_;
  CondVar not_full_;
  std::function<void()> on_change_ GUARDED_BY(lock_);
  std::vector<Column> columns_ GUARDED_BY(lock_);
  bool has_columns_ GUARDED_BY(lock_) = false;
  std::deque<ResultPage> pages_ GUARDED_BY(lock_);
  int64_t rows_ GUARDED_BY(lock_) = 0;
  int64_t bytes_ GUARDED_BY(lock_) = 0;
  int64_t peak_bytes_ GUARDED_BY(lock_) = 0;
  bool producer_waiting_ GUARDED_BY(lock_) = false;
  bool closed_ GUARDED_BY(lock_) = false;
  bool finished_ GUARDED_BY(lock_) = false;
  std::optional<QueryError> error_ GUARDED_BY(lock_);
};

}  // namespace qr
