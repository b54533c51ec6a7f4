#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "service/query-history-index.h"
#include "service/query-history-record.h"
#include "util/mutex.h"
#include "util/status.h"
#include "util/thread-annotations.h"

namespace qr {

/// How the history is written and synced (docs/operations.md#query-history).
enum class HistorySyncMode {
  kBatch,     // written at once (grouped), fdatasync(2) for everything written since the last
  kInterval,  // written within 'sync_interval_ms' (once per interval under load), then synced
  kNone,      // written as with kInterval, never synced: the kernel writes back when it likes
};
/// "batch", "interval", "none"; false for anything else.
bool ParseHistorySyncMode(std::string_view text, HistorySyncMode* mode);

/// The system calls that write the history and make it durable, and the read of a segment
/// at start-up. The history goes through them so that a test can stall them as a slow or hung
/// disk would, or fail them as a bad one; the default makes the real calls.
/// Thread-safety: called from the writer and the sync thread at once.
class HistoryFileOps {
 public:
  virtual ~HistoryFileOps() = default;
  /// write(2).
  virtual ssize_t Write(int fd, const void* data, size_t size);
  /// fdatasync(2).
  virtual int Fdatasync(int fd);
  /// Reads the whole file 'path' into '*data'; false with strerror() in '*error'.
  virtual bool ReadFile(const std::string& path, std::string* data, std::string* error);
};

/// What reading the history back found.
struct HistoryReadStats {
  int64_t segments = 0;
  int64_t records = 0;
  int64_t bytes = 0;
  /// Segments that end inside a record (a crash during a write): the partial record is
  /// skipped.
  int64_t torn_tails = 0;
  /// Segments with a record whose checksum or contents do not match: the rest of that
  /// segment is skipped (or, for whole records this version cannot decode, those records).
  int64_t corrupt_segments = 0;
  /// Segments that could not be read at all (an I/O error, no permission): skipped.
  int64_t unreadable_segments = 0;
};

/// Reads the newest 'max_records' records of the history in 'dir' (oldest first into 'out'),
/// reading segments newest first and stopping once it has enough. A torn tail or a corrupt
/// record ends that segment's records and is counted, never an error; an unreadable
/// directory or file is.
Status ReadQueryHistory(const std::string& dir, size_t max_records,
                        std::vector<QueryHistoryRecord>* out, HistoryReadStats* stats);

/// The durable query history: an append-only log of completed queries in segment files
/// ('history-<sequence>.log', 20 digits) under one directory, written by a background thread.
///
/// Append() is all a query pays: it moves the record into a bounded queue and wakes the writer
/// only when that is needed (sync mode batch: the writer sleeps; interval and none: the queue
/// was empty or is half full; otherwise the writer's timer comes first). The writer takes
/// everything queued at once (group commit), encodes it into one buffer and writes it with one
/// write(2): at once in mode batch, once per 'sync_interval_ms' in modes interval and none. A
/// second thread calls fdatasync(2) (modes batch and interval) for everything written since
/// its previous call, so a slow sync delays no write: a process crash loses only what was
/// still queued. When the queue is full, a record is dropped and counted, with a warning in
/// the log: a query never waits for the disk.
/// A segment is closed (synced) once it passes 'segment_bytes' or a sync of it failed;
/// closed segments are deleted by age, by count and by total bytes, and empty ones at once.
/// Each start opens a new segment, and a failed write is cut back off (or, if that fails,
/// closes the segment), so nothing is ever appended after a torn tail.
///
/// Thread-safety: all methods are thread-safe.
/// Lifecycle: Open() -> Append()... -> destroy (writes and syncs what is queued, then stops).
class QueryHistory {
 public:
  struct Options {
    std::string dir;
    HistorySyncMode sync = HistorySyncMode::kBatch;
    /// Modes interval and none: the longest a record waits to be written and synced (the
    /// writer writes within three quarters of it, the rest is for the write and the sync).
    int64_t sync_interval_ms = 1000;
    int64_t segment_bytes = int64_t{64} << 20;
    /// Retention of closed segments (0: no limit by that measure). The segment being written
    /// is never deleted.
    int64_t max_age_s = 7 * 24 * 3600;
    int64_t max_segments = 1000;
    int64_t max_total_bytes = int64_t{1} << 30;
    /// Records waiting for the writer at most; beyond, Append() drops.
    size_t queue_capacity = 50000;
    /// Tests only: the writer calls it before writing each batch (to stall it, as a slow
    /// disk would).
    std::function<void()> before_write_for_testing;
    /// The writes and syncs go through it; null: the real system calls.
    std::shared_ptr<HistoryFileOps> file_ops;
  };

  /// Creates 'options.dir' if needed, applies retention, indexes the retained segments (every
  /// frame's checksums are verified: a torn tail or a corrupt record ends its segment's
  /// records, counted in index_stats()), opens a new segment and starts the writer (and sync)
  /// threads.
  static Status Open(Options options, std::unique_ptr<QueryHistory>* out);
  ~QueryHistory();
  QueryHistory(const QueryHistory&) = delete;
  QueryHistory& operator=(const QueryHistory&) = delete;

  /// Hands 'record' to the writer; false (and counted) if the queue is full.
  bool Append(QueryHistoryRecord record);
  /// Waits until every record appended before the call is written and, unless the sync mode
  /// is none, synced. For tests and benchmarks; in modes interval and none it waits for the
  /// writer's timer.
  void Flush();

  /// The writer writes a batch in pieces of about this many bytes at most (each one write(2),
  /// and one record more than this when a record alone is larger).
  static constexpr size_t kMaxWriteBytes = 16 << 20;

  /// Upper bounds (seconds) of the sync latency histogram's buckets; the last is +Inf.
  static constexpr std::array<double, 10> kSyncBucketsSeconds = {
      0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5};
  struct Stats {
    int64_t records = 0, bytes = 0, batches = 0, syncs = 0, dropped = 0, write_errors = 0;
    /// Records written with texts cut to fit a record (kMaxHistoryPayloadBytes).
    int64_t cut_records = 0;
    int64_t segments_created = 0, segments_deleted = 0, queue_length = 0;
    /// Cumulative counts per sync latency bucket (the last is +Inf = 'syncs'), and the sum.
    std::array<int64_t, kSyncBucketsSeconds.size() + 1> sync_buckets{};
    double sync_seconds_sum = 0;
  };
  Stats GetStats() const;
  const Options& options() const { return options_; }

  /// Every record written and retained (docs/architecture.md#query-history).
  const HistoryIndex& index() const { return index_; }
  /// What Open() found indexing the segments.
  const HistoryReadStats& index_stats() const { return index_stats_; }
  /// Reads the records of 'entries' (from index()) from the segments; nullopt for one whose
  /// segment retention has deleted since.
  void ReadRecords(const std::vector<HistoryIndexEntry>& entries,
                   std::vector<std::optional<QueryHistoryRecord>>* out) const {
    ReadHistoryRecords(options_.dir, entries, out);
  }

 private:
  /// An open segment file; closed when the last user (writer or sync thread) lets go.
  struct SegmentFile {
    explicit SegmentFile(int fd) : fd(fd) {}
    ~SegmentFile();
    const int fd;
  };

  explicit QueryHistory(Options options);
  void WriterLoop();
  /// Waits until the writer has something to write (or must stop); false to stop.
  bool WaitForWorkLocked() QR_REQUIRES(lock_);
  void SyncLoop();
  /// Writes 'buffer' to the current segment (opening one if needed); false on an I/O error.
  /// '*segment' and '*offset' are where it was written.
  bool WriteBatch(const std::string& buffer, uint64_t* segment, uint64_t* offset);
  /// Indexes the segments there are (Open()).
  Status BuildIndex();
  /// fdatasync() of 'file', timed and counted; false (logged, counted) if it failed.
  bool Sync(const SegmentFile& file);
  Status OpenSegment();
  /// Rotates if the current segment is full or a sync of it failed.
  void MaybeRotate();
  /// With --query_history_max_age_s, every quarter of it (at most a minute): closes the
  /// current segment once it is older than the limit and applies retention, so that age
  /// retention does not wait for a segment to fill (a quiet daemon may take months).
  void MaybeApplyAgeRetention();
  /// How often MaybeApplyAgeRetention() runs.
  std::chrono::milliseconds AgeCheckPeriod() const;
  /// Closes (syncs) the current segment, deletes what retention allows and opens the next.
  void Rotate();
  void ApplyRetention();

  const Options options_;
  /// options_.file_ops, or the real system calls.
  HistoryFileOps* const ops_;
  /// Append() wakes a timed writer early once the queue holds this many records.
  const size_t high_water_;

  /// Protects the queue, the counters of written and synced records, and the handshakes.
  mutable Mutex lock_;
  /// Wakes the writer (records queued, or stop).
  CondVar work_cv_;
  /// Wakes the sync thread (records written, or stop).
  CondVar sync_cv_;
  /// Wakes Flush() callers.
  CondVar done_cv_;
  std::vector<QueryHistoryRecord> queue_ QR_GUARDED_BY(lock_);
  /// True while the writer waits; Append() notifies it only then (and only if needed).
  bool writer_idle_ QR_GUARDED_BY(lock_) = false;
  /// True while that wait has no deadline (modes interval and none: the queue was empty).
  bool writer_untimed_ QR_GUARDED_BY(lock_) = false;
  /// When the oldest record in the queue was appended (modes interval and none: the writer
  /// writes it within three quarters of the interval, leaving the rest for the write itself).
  std::chrono::steady_clock::time_point first_queued_ QR_GUARDED_BY(lock_);
  bool stop_ QR_GUARDED_BY(lock_) = false;
  bool stop_sync_ QR_GUARDED_BY(lock_) = false;
  /// Records accepted by Append(); records the writer is done with (written, or failed); and
  /// the written count the last completed sync covered. Flush() waits on them.
  uint64_t accepted_ QR_GUARDED_BY(lock_) = 0;
  uint64_t written_ QR_GUARDED_BY(lock_) = 0;
  uint64_t synced_ QR_GUARDED_BY(lock_) = 0;
  /// The segment the writer last wrote to, for the sync thread.
  std::shared_ptr<SegmentFile> sync_file_ QR_GUARDED_BY(lock_);

  // The writer thread's own state (no lock: only it touches these after Open()).
  std::shared_ptr<SegmentFile> file_;
  uint64_t next_sequence_ = 0;
  int64_t segment_size_ = 0;
  /// When the current segment was opened, and when age retention runs next (the writer's
  /// wait reads it, under lock_, on the writer's own thread).
  std::chrono::steady_clock::time_point segment_opened_;
  std::chrono::steady_clock::time_point next_age_check_;

  HistoryIndex index_;
  HistoryReadStats index_stats_;

  std::atomic<int64_t> records_{0}, bytes_{0}, batches_{0}, syncs_{0}, dropped_{0},
      write_errors_{0}, segments_created_{0}, segments_deleted_{0}, cut_records_{0};
  std::array<std::atomic<int64_t>, kSyncBucketsSeconds.size() + 1> sync_buckets_{};
  std::atomic<int64_t> sync_ns_sum_{0};
  /// Set by the sync thread when an fdatasync() failed; the writer then rotates.
  std::atomic<bool> sync_failed_{false};
  /// When the last warning about drops was logged (steady clock, ms).
  std::atomic<int64_t> last_drop_warning_ms_{0};
  std::thread writer_;
  std::thread syncer_;
  /// The directory's LOCK file, flock()ed while this history is open (-1: none yet).
  int dir_lock_fd_ = -1;
};

}  // namespace qr
