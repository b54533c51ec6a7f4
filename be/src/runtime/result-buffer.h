#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/memory-budget.h"
#include "runtime/query-error.h"
#include "runtime/spill-accounting.h"
#include "runtime/spool-file.h"
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
/// At most 'max_rows' rows or 'max_bytes' JSON bytes are held in memory (a single page larger
/// than that is still accepted when the buffer is empty). Beyond them, with spooling enabled,
/// pages go to an anonymous spool file (SpoolFile) charged to the query's spill account, so
/// that the producer (an executor thread) runs to the end whether or not the client reads;
/// they are written in batches of about 1 MiB and read back, in order, by TryGet(), which
/// punches what has been read out of the file (in steps of kPunchBytes, or at once while the
/// producer waits for quota) and gives its quota back, so a client that reads keeps the
/// producer going however large the result, with at most the quota on disk. Without
/// spooling, or once the spill quota refuses a page, Put() blocks until the client reads
/// (backpressure: an unread huge result never sits in memory). The consumer never waits for
/// the producer: TryGet() answers at once (reading a spooled page from the file if needed),
/// and the change listener tells it when to try again.
/// Thread-safety: thread-safe; one producer thread and any number of consumer threads.
class ResultBuffer {
 public:
  /// 'on_change' is called, with no lock held, after columns arrive, a page arrives, or the
  /// producer finishes. It may be called from the producer thread; keep it short.
  ResultBuffer(int64_t max_rows, int64_t max_bytes, std::function<void()> on_change = nullptr);
  /// Gives back the spill quota of the spool (the file closes with its last reader).
  ~ResultBuffer();
  ResultBuffer(const ResultBuffer&) = delete;
  ResultBuffer& operator=(const ResultBuffer&) = delete;

  /// Spooled pages are written once this many bytes wait in memory (and at Finish()).
  static constexpr int64_t kSpoolBatchBytes = 1 << 20;
  /// Read spool bytes are punched out of the file (and their quota given back) once this many
  /// are waiting, or at once (whole 4 KiB blocks) while the producer waits for quota.
  static constexpr int64_t kPunchBytes = 1 << 20;

  /// Replaces the change listener. Call before the producer starts.
  void SetOnChange(std::function<void()> on_change);
  /// Pages that do not fit in memory go to a spool file in 'dir' (created on first need),
  /// their bytes charged to 'account' (the query's spill quota); pages read back from it are
  /// charged to 'read_budget' (may be null; else it must outlive the buffer). Call from the
  /// producer, before its first Put().
  void EnableSpooling(std::string dir, std::shared_ptr<SpillAccount> account,
                      MemoryBudget* read_budget);

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
  /// Bytes held in memory: pages not spooled, and spooled pages not yet written.
  int64_t buffered_bytes() const;
  /// Bytes of spooled pages whose quota is held: written or waiting to be, and not yet
  /// punched out of the file after being read.
  int64_t spooled_bytes() const;
  /// Bytes ever placed in the spool file (what was written, punched or not).
  int64_t spool_file_bytes() const;
  /// Times the producer had to wait because the spill quota refused a page.
  int64_t spool_quota_waits() const;
  /// While the producer waits for the client to fetch, why: which quota refused to spool
  /// ("the query's spill quota (--query_max_spill_mb) is full", ...), or that results cannot
  /// be spooled. Empty while it is not waiting.
  std::string blocked_reason() const;
  /// Highest buffered_bytes() ever observed (for tests of the backpressure limit).
  int64_t peak_buffered_bytes() const;
  bool finished() const;

 private:
  void NotifyChange();
  /// A page waiting in (or written to) the spool file; 'offset' is -1 until it is written,
  /// and 'in_memory' holds the page until then (a consumer may take it from there).
  struct SpooledPage {
    uint64_t seq;
    int64_t offset;
    int64_t length;
    int64_t num_rows;
    int64_t num_bytes;
    std::shared_ptr<const std::string> in_memory;
  };
  /// Appends 'page' to the spool if its quota allows; false otherwise. On first use it opens
  /// the file instead, with 'lock_' released meanwhile ('*released_lock' set), and returns
  /// false: the caller must look at the buffer again before waiting.
  bool SpoolLocked(ResultPage* page, int64_t page_bytes, bool* released_lock) QR_REQUIRES(lock_);
  /// Writes the spooled pages not yet written, in one gathered write. Producer thread only.
  void FlushSpool() QR_EXCLUDES(lock_);
  /// Reads spooled page 'e' back from the file (no lock held).
  Next ReadSpooled(const std::shared_ptr<SpoolFile>& file, const SpooledPage& e,
                   ResultPage* page, std::optional<QueryError>* error);
  void ReleaseSpoolLocked() QR_REQUIRES(lock_);
  /// After a read from the spool: punches the read prefix of the file beyond 'punched_' and
  /// gives its quota back, when no other read is in flight and enough is waiting. Releases
  /// 'lock_' around the fallocate. 'file' is held by value: the caller's pointer may be
  /// spool_, which a Close() during the fallocate takes.
  void MaybePunchLocked(std::shared_ptr<SpoolFile> file) QR_REQUIRES(lock_);

  const int64_t max_rows_;
  const int64_t max_bytes_;
  /// Protects everything below, and is held only for O(1) work.
  mutable Mutex lock_;
  CondVar not_full_;
  std::function<void()> on_change_ QR_GUARDED_BY(lock_);
  std::vector<Column> columns_ QR_GUARDED_BY(lock_);
  bool has_columns_ QR_GUARDED_BY(lock_) = false;
  std::deque<ResultPage> pages_ QR_GUARDED_BY(lock_);
  int64_t rows_ QR_GUARDED_BY(lock_) = 0;
  int64_t bytes_ QR_GUARDED_BY(lock_) = 0;
  int64_t peak_bytes_ QR_GUARDED_BY(lock_) = 0;
  bool producer_waiting_ QR_GUARDED_BY(lock_) = false;
  bool closed_ QR_GUARDED_BY(lock_) = false;
  bool finished_ QR_GUARDED_BY(lock_) = false;
  std::optional<QueryError> error_ QR_GUARDED_BY(lock_);

  // Spooling (EnableSpooling()). Set before the producer starts, then read-only:
  std::string spool_dir_;
  std::shared_ptr<SpillAccount> spill_account_;
  MemoryBudget* read_budget_ = nullptr;
  /// Opened by the producer on first need; consumers copy the pointer to read outside the lock.
  std::shared_ptr<SpoolFile> spool_ QR_GUARDED_BY(lock_);
  bool spool_failed_ QR_GUARDED_BY(lock_) = false;
  /// Pages in the spool, oldest first; they come after every page in 'pages_'.
  std::deque<SpooledPage> spooled_ QR_GUARDED_BY(lock_);
  uint64_t next_seq_ QR_GUARDED_BY(lock_) = 0;
  int64_t spool_size_ QR_GUARDED_BY(lock_) = 0;      // bytes assigned in the file
  int64_t spool_reserved_ QR_GUARDED_BY(lock_) = 0;  // bytes held of 'spill_account_'
  int64_t unwritten_bytes_ QR_GUARDED_BY(lock_) = 0;
  /// The file is complete up to here (writes finished); a write may be in flight beyond it.
  int64_t written_end_ QR_GUARDED_BY(lock_) = 0;
  /// The file's blocks below this offset are punched (their quota given back).
  int64_t punched_ QR_GUARDED_BY(lock_) = 0;
  /// Spool reads running outside the lock; nothing is punched while one runs.
  int reads_in_flight_ QR_GUARDED_BY(lock_) = 0;
  bool punching_ QR_GUARDED_BY(lock_) = false;
  /// Set when the file system cannot punch holes: read bytes keep their quota until the end.
  bool punch_unsupported_ QR_GUARDED_BY(lock_) = false;
  int64_t spool_quota_waits_ QR_GUARDED_BY(lock_) = 0;
  /// Why the producer cannot place its page (set with 'producer_waiting_'); static text.
  const char* blocked_reason_ QR_GUARDED_BY(lock_) = "";
};

}  // namespace qr
