// The query history's writer: appends, group commit, syncs, rotation and retention. Reading
// it back is query-history-read.cc.

#include "service/query-history.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include <glog/logging.h>

#include "service/query-history-segments.h"

namespace qr {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using history_internal::kMaxSegmentOffset;
using history_internal::ListSegments;
using history_internal::Segment;

/// flock()ed by the process that has the directory open.
constexpr char kLockFileName[] = "LOCK";

}  // namespace

bool ParseHistorySyncMode(std::string_view text, HistorySyncMode* mode) {
  if (text == "batch") *mode = HistorySyncMode::kBatch;
  else if (text == "interval") *mode = HistorySyncMode::kInterval;
  else if (text == "none") *mode = HistorySyncMode::kNone;
  else return false;
  return true;
}

QueryHistory::SegmentFile::~SegmentFile() { close(fd); }

ssize_t HistoryFileOps::Write(int fd, const void* data, size_t size) {
  return write(fd, data, size);
}

int HistoryFileOps::Fdatasync(int fd) { return fdatasync(fd); }

namespace {
HistoryFileOps* RealFileOps() {
  static HistoryFileOps* const ops = new HistoryFileOps();
  return ops;
}
}  // namespace

QueryHistory::QueryHistory(Options options)
    : options_(std::move(options)),
      ops_(options_.file_ops ? options_.file_ops.get() : RealFileOps()),
      high_water_(std::max<size_t>(1, options_.queue_capacity / 2)) {}

Status QueryHistory::Open(Options options, std::unique_ptr<QueryHistory>* out) {
  if (options.dir.empty()) return InvalidArgument("the query history needs a directory");
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec || !fs::is_directory(options.dir)) {
    return Internal("cannot create the query history directory " + options.dir + ": " +
                    (ec ? ec.message() : "not a directory"));
  }
  std::unique_ptr<QueryHistory> history(new QueryHistory(std::move(options)));
  // One process per directory: a second one would take the first one's open (still empty)
  // segment for a closed one, and its retention could delete it under the writer.
  const std::string lock_path = (fs::path(history->options_.dir) / kLockFileName).string();
  history->dir_lock_fd_ = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (history->dir_lock_fd_ < 0) {
    return Internal("cannot open " + lock_path + ": " + strerror(errno));
  }
  if (flock(history->dir_lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      return InvalidArgument(
          "the query history directory " + history->options_.dir +
          " is in use by another coordinator (it holds " + lock_path +
          "); each coordinator needs its own --query_history_dir");
    }
    return Internal("cannot lock " + lock_path + ": " + strerror(err));
  }
  std::vector<Segment> segments;
  QR_RETURN_IF_ERROR(ListSegments(history->options_.dir, &segments));
  history->next_sequence_ = segments.empty() ? 1 : segments.back().sequence + 1;
  history->ApplyRetention();
  QR_RETURN_IF_ERROR(history->BuildIndex());
  QR_RETURN_IF_ERROR(history->OpenSegment());
  history->next_age_check_ = Clock::now() + history->AgeCheckPeriod();
  QueryHistory* h = history.get();
  h->writer_ = std::thread([h] { h->WriterLoop(); });
  if (h->options_.sync != HistorySyncMode::kNone) h->syncer_ = std::thread([h] { h->SyncLoop(); });
  *out = std::move(history);
  return Status::OK();
}

QueryHistory::~QueryHistory() {
  {
    MutexLock l(&lock_);
    stop_ = true;
  }
  work_cv_.NotifyAll();
  if (writer_.joinable()) writer_.join();  // it writes what is queued first
  {
    MutexLock l(&lock_);
    stop_sync_ = true;
  }
  sync_cv_.NotifyAll();
  if (syncer_.joinable()) syncer_.join();  // it syncs what was written first
  file_.reset();
  if (dir_lock_fd_ >= 0) close(dir_lock_fd_);  // the directory is free for another process
}

bool QueryHistory::Append(QueryHistoryRecord record) {
  bool wake = false;
  int64_t dropped = 0;
  {
    MutexLock l(&lock_);
    if (queue_.size() < options_.queue_capacity && !stop_) {
      if (queue_.empty()) first_queued_ = Clock::now();
      queue_.push_back(std::move(record));
      ++accepted_;
      // One notification per sleep, and none while the writer's timer will come first.
      wake = writer_idle_ && (options_.sync == HistorySyncMode::kBatch || writer_untimed_ ||
                              queue_.size() >= high_water_);
      if (wake) writer_idle_ = false;
    } else {
      dropped = dropped_.fetch_add(1, std::memory_order_relaxed) + 1;
    }
  }
  if (wake) work_cv_.NotifyOne();
  if (dropped == 0) return true;
  // The first drop, then at most one warning per 10 s: a flood of drops must not become a
  // flood of log lines (the counter has the exact number).
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             Clock::now().time_since_epoch()).count();
  int64_t last = last_drop_warning_ms_.load(std::memory_order_relaxed);
  if ((dropped == 1 || now_ms - last >= 10000) &&
      last_drop_warning_ms_.compare_exchange_strong(last, now_ms, std::memory_order_relaxed)) {
    LOG(WARNING) << "Query history: the writer's queue is full (" << options_.queue_capacity
                 << " records, --query_history_queue_size): " << dropped
                 << " records dropped so far (qr_history_dropped_records_total)";
  }
  return false;
}

void QueryHistory::Flush() {
  MutexLock l(&lock_);
  const uint64_t target = accepted_;
  const bool syncs = options_.sync != HistorySyncMode::kNone;
  while (written_ < target || (syncs && synced_ < target)) done_cv_.Wait(&lock_);
}

bool QueryHistory::WaitForWorkLocked() {
  const bool timed = options_.sync != HistorySyncMode::kBatch;
  // Modes interval and none: the oldest queued record sets the deadline; the queue is written
  // three quarters of the interval after it arrived, or once it is half full.
  const auto delay = std::chrono::microseconds(options_.sync_interval_ms * 750);
  std::optional<Clock::time_point> deadline;
  const bool aging = options_.max_age_s > 0;
  for (;;) {
    if (stop_) return false;
    // Age retention is due: back to the loop, with or without records.
    if (aging && Clock::now() >= next_age_check_) return true;
    if (!queue_.empty()) {
      if (!timed || queue_.size() >= high_water_) return true;
      deadline = first_queued_ + delay;
      if (Clock::now() >= *deadline) return true;
    } else {
      deadline.reset();
    }
    writer_idle_ = true;
    // Untimed as far as records go (Append() must wake it to set their deadline), even
    // while the age check sets when it wakes by itself.
    writer_untimed_ = !deadline.has_value();
    std::optional<Clock::time_point> wake = deadline;
    if (aging && (!wake || next_age_check_ < *wake)) wake = next_age_check_;
    if (wake) {
      work_cv_.WaitUntil(&lock_, *wake);
    } else {
      work_cv_.Wait(&lock_);
    }
    writer_idle_ = false;
  }
}

void QueryHistory::WriterLoop() {
  std::vector<QueryHistoryRecord> batch;
  std::string buffer;
  std::vector<size_t> frame_ends;
  for (;;) {
    bool stopping = false;
    {
      MutexLock l(&lock_);
      stopping = !WaitForWorkLocked();
      batch.swap(queue_);  // after stop_, Append() adds nothing: this is the last of it
    }
    if (!batch.empty()) {
      if (options_.before_write_for_testing) options_.before_write_for_testing();
      // In writes of about kMaxWriteBytes at most: after a stall the queue may hold 50,000
      // records of large statements, which encoded at once took (and, the buffer keeping its
      // capacity, held for good) a gigabyte; between writes a full segment rotates.
      for (size_t first = 0; first < batch.size();) {
        buffer.clear();
        frame_ends.clear();
        size_t end = first;
        while (end < batch.size() && (end == first || buffer.size() < kMaxWriteBytes)) {
          if (!EncodeHistoryRecord(batch[end], &buffer)) {
            cut_records_.fetch_add(1, std::memory_order_relaxed);
          }
          frame_ends.push_back(buffer.size());
          ++end;
        }
        const auto records = static_cast<int64_t>(end - first);
        uint64_t segment = 0, offset = 0;
        if (WriteBatch(buffer, &segment, &offset)) {
          // Indexed once written: a list reads only what is in a segment.
          size_t start = 0;
          for (size_t i = first; i < end; ++i) {
            const QueryHistoryRecord& r = batch[i];
            HistoryRecordSummary summary{r.query_id,       r.user,
                                         r.source,         r.state,
                                         r.submit_time_ms, r.submit_time_extra_ns,
                                         r.elapsed_ms,     r.rows_delivered};
            index_.Add(summary, segment, offset + start, frame_ends[i - first] - start);
            start = frame_ends[i - first];
          }
          records_.fetch_add(records, std::memory_order_relaxed);
          bytes_.fetch_add(static_cast<int64_t>(buffer.size()), std::memory_order_relaxed);
          batches_.fetch_add(1, std::memory_order_relaxed);
        } else {
          dropped_.fetch_add(records, std::memory_order_relaxed);
        }
        MaybeRotate();
        first = end;
      }
      if (buffer.capacity() > 2 * kMaxWriteBytes) std::string().swap(buffer);
    }
    MaybeApplyAgeRetention();
    {
      MutexLock l(&lock_);
      written_ += batch.size();
      sync_file_ = file_;
    }
    batch.clear();
    sync_cv_.NotifyOne();
    done_cv_.NotifyAll();
    if (stopping) return;
  }
}

void QueryHistory::SyncLoop() {
  for (;;) {
    std::shared_ptr<SegmentFile> file;
    uint64_t target = 0;
    {
      MutexLock l(&lock_);
      while (synced_ >= written_ && !stop_sync_) sync_cv_.Wait(&lock_);
      if (synced_ >= written_) return;  // stopping, and everything written is synced
      file = sync_file_;
      target = written_;
    }
    // Everything written so far, in one call: the writes made meanwhile wait for the next.
    if (file && !Sync(*file)) {
      // The kernel may have dropped the pages that failed, and a later fdatasync() of this
      // file would succeed without them: the writer moves on to a new segment.
      sync_failed_.store(true, std::memory_order_relaxed);
    }
    {
      MutexLock l(&lock_);
      synced_ = target;
    }
    done_cv_.NotifyAll();
  }
}

bool QueryHistory::WriteBatch(const std::string& buffer, uint64_t* segment, uint64_t* offset) {
  // The index holds offsets in 32 bits: a batch that would end past them starts a segment.
  if (file_ && segment_size_ > 0 &&
      static_cast<uint64_t>(segment_size_) + buffer.size() > kMaxSegmentOffset) {
    Rotate();
  }
  if (!file_ && !OpenSegment().ok()) return false;
  *segment = next_sequence_ - 1;
  *offset = static_cast<uint64_t>(segment_size_);
  size_t written = 0;
  while (written < buffer.size()) {
    ssize_t n = ops_->Write(file_->fd, buffer.data() + written, buffer.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      write_errors_.fetch_add(1, std::memory_order_relaxed);
      // Cut what was written back off, so that the segment ends at its last whole record and
      // the next batch follows it: a disk that stays full then costs no new (empty) segment
      // per batch, which retention by count would take for history. If that fails, the part
      // written stays a torn tail, which ends the segment's records: the next batch starts a
      // new segment (this one synced first, as a rotation does).
      const bool kept = written == 0 || ftruncate(file_->fd, segment_size_) == 0;
      LOG(ERROR) << "Query history: writing " << buffer.size() << " bytes to segment "
                 << HistorySegmentName(next_sequence_ - 1) << " failed: " << strerror(err)
                 << "; the batch is dropped"
                 << (kept ? "" : ", and the next one starts a new segment");
      if (!kept) Rotate();
      return false;
    }
    written += static_cast<size_t>(n);
  }
  segment_size_ += static_cast<int64_t>(buffer.size());
  return true;
}

bool QueryHistory::Sync(const SegmentFile& file) {
  const auto start = Clock::now();
  const bool ok = ops_->Fdatasync(file.fd) == 0;
  if (!ok) {
    write_errors_.fetch_add(1, std::memory_order_relaxed);
    LOG(ERROR) << "Query history: fdatasync failed: " << strerror(errno)
               << "; what was written since the last sync may be lost, and the writer moves to "
                  "a new segment";
  }
  const int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
  syncs_.fetch_add(1, std::memory_order_relaxed);
  sync_ns_sum_.fetch_add(ns, std::memory_order_relaxed);
  size_t bucket = 0;
  while (bucket < kSyncBucketsSeconds.size() && ns > kSyncBucketsSeconds[bucket] * 1e9) ++bucket;
  sync_buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  return ok;
}

Status QueryHistory::OpenSegment() {
  const fs::path path = fs::path(options_.dir) / HistorySegmentName(next_sequence_);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0640);
  ++next_sequence_;  // a failed attempt's name is not retried
  if (fd < 0) {
    const int err = errno;
    write_errors_.fetch_add(1, std::memory_order_relaxed);
    LOG(ERROR) << "Query history: cannot create " << path.string() << ": " << strerror(err);
    return Internal("cannot create query history segment " + path.string() + ": " +
                    strerror(err));
  }
  // The new name must survive a crash too: sync the directory once per segment.
  int dir = open(options_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    if (options_.sync != HistorySyncMode::kNone) fsync(dir);
    close(dir);
  }
  file_ = std::make_shared<SegmentFile>(fd);
  segment_size_ = 0;
  segment_opened_ = Clock::now();
  segments_created_.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

std::chrono::milliseconds QueryHistory::AgeCheckPeriod() const {
  return std::chrono::milliseconds(
      std::clamp<int64_t>(options_.max_age_s, 1, 240) * 250);  // a quarter, at most 60 s
}

void QueryHistory::MaybeApplyAgeRetention() {
  if (options_.max_age_s <= 0) return;
  const auto now = Clock::now();
  if (now < next_age_check_) return;
  next_age_check_ = now + AgeCheckPeriod();
  // A segment is deleted by age once its newest record is older than the limit; the open
  // one is closed once it is itself that old, so a record is gone at most about twice the
  // limit after it was written (and a quarter of it, at most a minute, later).
  if (file_ && segment_size_ > 0 &&
      now - segment_opened_ >= std::chrono::seconds(options_.max_age_s)) {
    Rotate();  // applies retention
  } else {
    ApplyRetention();
  }
}

void QueryHistory::MaybeRotate() {
  if (!file_) return;
  // The flag is taken in any case: a full segment rotates for both reasons at once (with ||,
  // the flag outlived the rotation and rotated the fresh segment after its first batch).
  const bool sync_failed = sync_failed_.exchange(false, std::memory_order_relaxed);
  if (sync_failed || segment_size_ >= options_.segment_bytes) Rotate();
}

void QueryHistory::Rotate() {
  // The sync thread is only told about the newest segment: this one is synced here.
  if (options_.sync != HistorySyncMode::kNone) Sync(*file_);
  file_.reset();
  ApplyRetention();
  // A failure leaves no segment open; WriteBatch() tries again.
  (void)OpenSegment();
}

void QueryHistory::ApplyRetention() {
  std::vector<Segment> segments;
  if (!ListSegments(options_.dir, &segments).ok()) return;
  // Only closed segments: every one below the next sequence number, except an open one.
  const uint64_t open_sequence = file_ ? next_sequence_ - 1 : UINT64_MAX;
  std::erase_if(segments, [&](const Segment& s) { return s.sequence == open_sequence; });
  std::error_code ec;
  // Empty closed segments (a start that wrote nothing, a segment whose writes failed) hold
  // no record: deleted, so that they never count against the others.
  std::erase_if(segments, [&](const Segment& s) {
    const bool empty = fs::file_size(s.path, ec) == 0 && !ec && fs::remove(s.path, ec);
    if (empty) segments_deleted_.fetch_add(1, std::memory_order_relaxed);
    return empty;
  });
  int64_t total = 0;
  std::vector<int64_t> sizes;
  for (const Segment& s : segments) {
    sizes.push_back(static_cast<int64_t>(fs::file_size(s.path, ec)));
    if (ec) sizes.back() = 0;
    total += sizes.back();
  }
  const auto now = fs::file_time_type::clock::now();
  int64_t count = static_cast<int64_t>(segments.size());
  for (size_t i = 0; i < segments.size(); ++i) {
    const auto mtime = fs::last_write_time(segments[i].path, ec);
    // In whole seconds: a limit of seconds converted to the clock's nanoseconds would
    // overflow past ~292 years.
    const bool too_old =
        options_.max_age_s > 0 && !ec &&
        std::chrono::duration_cast<std::chrono::seconds>(now - mtime).count() >
            options_.max_age_s;
    const bool too_many = options_.max_segments > 0 && count > options_.max_segments;
    const bool too_big = options_.max_total_bytes > 0 && total > options_.max_total_bytes;
    if (!too_old && !too_many && !too_big) break;  // oldest first: the rest are newer
    if (!fs::remove(segments[i].path, ec) || ec) {
      LOG(WARNING) << "Query history: cannot delete " << segments[i].path.string() << ": "
                   << ec.message();
      continue;
    }
    segments_deleted_.fetch_add(1, std::memory_order_relaxed);
    index_.DropSegment(segments[i].sequence);
    --count;
    total -= sizes[i];
  }
}

QueryHistory::Stats QueryHistory::GetStats() const {
  Stats s;
  s.records = records_.load(std::memory_order_relaxed);
  s.bytes = bytes_.load(std::memory_order_relaxed);
  s.batches = batches_.load(std::memory_order_relaxed);
  s.syncs = syncs_.load(std::memory_order_relaxed);
  s.dropped = dropped_.load(std::memory_order_relaxed);
  s.write_errors = write_errors_.load(std::memory_order_relaxed);
  s.cut_records = cut_records_.load(std::memory_order_relaxed);
  s.segments_created = segments_created_.load(std::memory_order_relaxed);
  s.segments_deleted = segments_deleted_.load(std::memory_order_relaxed);
  int64_t cumulative = 0;
  for (size_t i = 0; i < sync_buckets_.size(); ++i) {
    cumulative += sync_buckets_[i].load(std::memory_order_relaxed);
    s.sync_buckets[i] = cumulative;
  }
  s.sync_seconds_sum = static_cast<double>(sync_ns_sum_.load(std::memory_order_relaxed)) / 1e9;
  MutexLock l(&lock_);
  s.queue_length = static_cast<int64_t>(queue_.size());
  return s;
}

}  // namespace qr
