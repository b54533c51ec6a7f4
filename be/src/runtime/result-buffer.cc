#include "runtime/result-buffer.h"

#include <algorithm>
#include <utility>

#include <glog/logging.h>

namespace qr {

ResultBuffer::ResultBuffer(int64_t max_rows, int64_t max_bytes, std::function<void()> on_change)
    : max_rows_(std::max<int64_t>(1, max_rows)),
      max_bytes_(std::max<int64_t>(1, max_bytes)),
      on_change_(std::move(on_change)) {}

void ResultBuffer::SetOnChange(std::function<void()> on_change) {
  MutexLock l(&lock_);
  on_change_ = std::move(on_change);
}

void ResultBuffer::NotifyChange() {
  std::function<void()> cb;
  {
    MutexLock l(&lock_);
    cb = on_change_;
  }
  if (cb) cb();
}

void ResultBuffer::SetColumns(std::vector<Column> columns) {
  {
    MutexLock l(&lock_);
    DCHECK(!has_columns_) << "SetColumns called twice";
    if (has_columns_) return;
    columns_ = std::move(columns);
    has_columns_ = true;
  }
  NotifyChange();
}

void ResultBuffer::EnableSpooling(std::string dir, std::shared_ptr<SpillAccount> account,
                                  MemoryBudget* read_budget) {
  MutexLock l(&lock_);
  DCHECK(pages_.empty() && spooled_.empty()) << "EnableSpooling after the first Put";
  spool_dir_ = std::move(dir);
  spill_account_ = std::move(account);
  read_budget_ = read_budget;
}

bool ResultBuffer::Put(ResultPage page) {
  const int64_t page_bytes = page.json_rows ? static_cast<int64_t>(page.json_rows->size()) : 0;
  bool flush = false;
  {
    MutexLock l(&lock_);
    for (;;) {
      if (closed_) {
        producer_waiting_ = false;
        return false;
      }
      // Memory first while nothing is spooled (pages leave in order); an empty buffer always
      // takes the page, however large.
      if (spooled_.empty() && (pages_.empty() || (rows_ + page.num_rows <= max_rows_ &&
                                                  bytes_ + page_bytes <= max_bytes_))) {
        rows_ += page.num_rows;
        bytes_ += page_bytes;
        peak_bytes_ = std::max(peak_bytes_, bytes_);
        pages_.push_back(std::move(page));
        break;
      }
      bool released_lock = false;
      if (SpoolLocked(&page, page_bytes, &released_lock)) {
        flush = unwritten_bytes_ >= kSpoolBatchBytes;
        break;
      }
      // The lock was released to open the file: a Close() or a consumer's TryGet() may have
      // come meanwhile, and neither woke us (we were not waiting). Look again before waiting.
      if (released_lock) continue;
      producer_waiting_ = true;
      not_full_.Wait(&lock_);
    }
    producer_waiting_ = false;
    blocked_reason_ = "";
  }
  if (flush) FlushSpool();
  NotifyChange();
  return true;
}

bool ResultBuffer::SpoolLocked(ResultPage* page, int64_t page_bytes, bool* released_lock) {
  if (spill_account_ == nullptr || spool_failed_) {
    blocked_reason_ = "waiting for the client to fetch: the in-memory result buffer is full and "
                      "results are not spooled to disk";
    return false;
  }
  if (spool_ == nullptr) {
    // Opening the file is I/O: not under the lock. Only the producer opens it.
    *released_lock = true;
    lock_.unlock();
    std::unique_ptr<SpoolFile> file;
    Status s = SpoolFile::Create(spool_dir_, &file);
    lock_.lock();
    if (!s.ok()) {
      LOG(WARNING) << "Results beyond the memory buffer will wait for the client: " << s.message();
      spool_failed_ = true;
      return false;
    }
    if (!closed_) spool_ = std::move(file);  // after Close(), the file just goes away
    return false;  // the caller looks at the buffer again (closed? room in memory?)
  }
  // A refused reservation waits for the client (the query says so in spool_quota_waits).
  if (!spill_account_->TryReserve(page_bytes, /*record_refusal=*/false)) {
    blocked_reason_ =
        spill_account_->used_bytes() + page_bytes > spill_account_->limit_bytes()
            ? "waiting for the client to fetch: the query's spill quota "
              "(--query_max_spill_mb) is full"
            : "waiting for the client to fetch: the spill budget of all queries "
              "(--max_spill_mb) is full";
    ++spool_quota_waits_;
    SpoolFile::stats().quota_waits.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  spool_reserved_ += page_bytes;
  spooled_.push_back(SpooledPage{next_seq_++, -1, page_bytes, page->num_rows, page->num_bytes,
                                 std::move(page->json_rows)});
  unwritten_bytes_ += page_bytes;
  return true;
}

void ResultBuffer::FlushSpool() {
  std::shared_ptr<SpoolFile> file;
  std::vector<std::shared_ptr<const std::string>> batch;
  int64_t offset = 0;
  int64_t batch_end = 0;
  uint64_t first_seq = 0;
  {
    MutexLock l(&lock_);
    // The unwritten pages are the newest: a suffix of 'spooled_'.
    size_t first = spooled_.size();
    while (first > 0 && spooled_[first - 1].offset < 0) --first;
    if (first == spooled_.size() || spool_ == nullptr) return;
    file = spool_;
    offset = spool_size_;
    first_seq = spooled_[first].seq;
    for (size_t i = first; i < spooled_.size(); ++i) {
      spooled_[i].offset = spool_size_;
      spool_size_ += spooled_[i].length;
      batch.push_back(spooled_[i].in_memory);
    }
    batch_end = spool_size_;
  }
  Status s = file->WriteAt(offset, batch);
  MutexLock l(&lock_);
  if (!s.ok()) {
    // The pages stay in memory (readers take them from there); no more spooling.
    LOG(WARNING) << s.message();
    spool_failed_ = true;
    return;
  }
  written_end_ = batch_end;  // only the producer writes, front to back
  // Pages a consumer took meanwhile are gone from the front; the rest leave memory now.
  for (SpooledPage& e : spooled_) {
    if (e.seq < first_seq || e.seq >= first_seq + batch.size() || !e.in_memory) continue;
    unwritten_bytes_ -= e.length;
    e.in_memory.reset();
  }
  // Pages read from memory during the write are in the file now, and already consumed.
  MaybePunchLocked(std::move(file));
}

void ResultBuffer::Finish(std::optional<QueryError> error) {
  FlushSpool();  // the producer is done: what waits for the file leaves memory
  {
    MutexLock l(&lock_);
    if (finished_) return;
    finished_ = true;
    error_ = std::move(error);
  }
  NotifyChange();
}

ResultBuffer::Next ResultBuffer::TryGet(ResultPage* page, std::optional<QueryError>* error) {
  MutexLock l(&lock_);
  if (!pages_.empty()) {
    *page = std::move(pages_.front());
    pages_.pop_front();
    rows_ -= page->num_rows;
    bytes_ -= page->json_rows ? static_cast<int64_t>(page->json_rows->size()) : 0;
    // Wake the producer only if it is actually waiting for room.
    if (producer_waiting_) not_full_.NotifyOne();
    return Next::kPage;
  }
  if (!spooled_.empty()) {
    SpooledPage e = std::move(spooled_.front());
    spooled_.pop_front();
    if (producer_waiting_) not_full_.NotifyOne();
    if (e.in_memory) {  // not written yet (or being written): no need for the file
      unwritten_bytes_ -= e.length;
      *page = ResultPage{std::move(e.in_memory), e.num_rows, e.num_bytes};
      if (e.offset < 0) {
        // It will never be written (the next flush writes what is still in 'spooled_'):
        // its quota goes back now.
        spool_reserved_ -= e.length;
        spill_account_->Release(e.length);
      } else {
        MaybePunchLocked(spool_);  // its write has run or runs now; punch what was read
      }
      return Next::kPage;
    }
    std::shared_ptr<SpoolFile> file = spool_;
    ++reads_in_flight_;
    lock_.unlock();  // the read is I/O; the written range of the file never changes
    Next next = ReadSpooled(file, e, page, error);
    lock_.lock();
    --reads_in_flight_;
    if (next == Next::kPage) {
      MaybePunchLocked(std::move(file));
    } else if (!closed_) {
      // The pages after this one cannot be delivered in order either: the query ends with
      // this error. Closed, the buffer fails the producer's Put() instead of leaving it to
      // wait for room that no consumer will make (its executor thread, its SQLite
      // connection and its spill quota held until shutdown), and gives the quota back.
      closed_ = true;
      ReleaseSpoolLocked();
      if (producer_waiting_) not_full_.NotifyAll();
    }
    return next;
  }
  if (finished_) {
    *error = error_;
    return Next::kEnd;
  }
  return Next::kNotYet;
}

ResultBuffer::Next ResultBuffer::ReadSpooled(const std::shared_ptr<SpoolFile>& file,
                                             const SpooledPage& e, ResultPage* page,
                                             std::optional<QueryError>* error) {
  std::string text;
  Status s = file->ReadAt(e.offset, e.length, &text);
  if (!s.ok()) {
    *error = QueryError::Internal("The query's results could not be read back: " + s.message());
    return Next::kEnd;
  }
  // Held by the client's answer until sent: charged like any page, never refused (the rows
  // were produced; failing now would lose them).
  if (read_budget_ != nullptr) read_budget_->Reserve(e.length);
  *page = ResultPage{MakeAccountedPage(std::move(text), e.length, read_budget_), e.num_rows,
                     e.num_bytes};
  return Next::kPage;
}

const std::vector<Column>* ResultBuffer::columns() const {
  MutexLock l(&lock_);
  return has_columns_ ? &columns_ : nullptr;
}

void ResultBuffer::Close() {
  std::deque<ResultPage> dropped;
  std::deque<SpooledPage> dropped_spooled;
  std::shared_ptr<SpoolFile> file;
  {
    MutexLock l(&lock_);
    closed_ = true;
    dropped.swap(pages_);
    dropped_spooled.swap(spooled_);
    rows_ = 0;
    bytes_ = 0;
    unwritten_bytes_ = 0;
    file = std::move(spool_);
    ReleaseSpoolLocked();
    if (producer_waiting_) not_full_.NotifyAll();
  }
  // The pages, and the file once no reader holds it, are freed here, outside the lock.
}

ResultBuffer::~ResultBuffer() {
  MutexLock l(&lock_);
  ReleaseSpoolLocked();
}

void ResultBuffer::ReleaseSpoolLocked() {
  if (spill_account_ != nullptr && spool_reserved_ > 0) spill_account_->Release(spool_reserved_);
  spool_reserved_ = 0;
}

void ResultBuffer::MaybePunchLocked(std::shared_ptr<SpoolFile> file) {
  if (reads_in_flight_ > 0 || punching_ || punch_unsupported_ || closed_ || file == nullptr) {
    return;
  }
  // Everything below the oldest page still to be read, and below the end of the finished
  // writes (a page taken from memory while its write runs has an offset past written_end_).
  int64_t end = written_end_;
  if (!spooled_.empty() && spooled_.front().offset >= 0) {
    end = std::min(end, spooled_.front().offset);
  }
  end &= ~int64_t{4095};  // whole file-system blocks; the partial one goes with the file
  const int64_t length = end - punched_;
  if (length <= 0 || (length < kPunchBytes && !producer_waiting_)) return;
  const int64_t from = punched_;
  punching_ = true;
  lock_.unlock();
  Status s = file->PunchHole(from, length);
  lock_.lock();
  punching_ = false;
  if (!s.ok()) {
    punch_unsupported_ = true;
    LOG_FIRST_N(WARNING, 1) << s.message() << "; read results keep their spill quota until "
                            << "their query ends";
    return;
  }
  punched_ = end;
  if (closed_ || spool_reserved_ == 0) return;  // Close() gave the whole quota back already
  const int64_t give_back = std::min(length, spool_reserved_);
  spool_reserved_ -= give_back;
  spill_account_->Release(give_back);
  if (producer_waiting_) not_full_.NotifyOne();
}

int64_t ResultBuffer::spool_file_bytes() const {
  MutexLock l(&lock_);
  return spool_size_;
}

int64_t ResultBuffer::spooled_bytes() const {
  MutexLock l(&lock_);
  return spool_reserved_;
}

std::string ResultBuffer::blocked_reason() const {
  MutexLock l(&lock_);
  return producer_waiting_ ? blocked_reason_ : "";
}

int64_t ResultBuffer::spool_quota_waits() const {
  MutexLock l(&lock_);
  return spool_quota_waits_;
}

int64_t ResultBuffer::buffered_rows() const {
  MutexLock l(&lock_);
  return rows_;
}

int64_t ResultBuffer::buffered_bytes() const {
  MutexLock l(&lock_);
  return bytes_ + unwritten_bytes_;
}

int64_t ResultBuffer::peak_buffered_bytes() const {
  MutexLock l(&lock_);
  return peak_bytes_;
}

bool ResultBuffer::finished() const {
  MutexLock l(&lock_);
  return finished_;
}

}  // namespace qr
