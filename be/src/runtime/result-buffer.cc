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

bool ResultBuffer::Put(ResultPage page) {
  const int64_t page_bytes = page.json_rows ? static_cast<int64_t>(page.json_rows->size()) : 0;
  {
    MutexLock l(&lock_);
    // Wait for room; an empty buffer always takes the page, however large.
    while (!closed_ && !pages_.empty() &&
           (rows_ + page.num_rows > max_rows_ || bytes_ + page_bytes > max_bytes_)) {
      producer_waiting_ = true;
      not_full_.Wait(&lock_);
    }
    producer_waiting_ = false;
    if (closed_) return false;
    rows_ += page.num_rows;
    bytes_ += page_bytes;
    peak_bytes_ = std::max(peak_bytes_, bytes_);
    pages_.push_back(std::move(page));
  }
  NotifyChange();
  return true;
}

void ResultBuffer::Finish(std::optional<QueryError> error) {
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
  if (finished_) {
    *error = error_;
    return Next::kEnd;
  }
  return Next::kNotYet;
}

const std::vector<Column>* ResultBuffer::columns() const {
  MutexLock l(&lock_);
  return has_columns_ ? &columns_ : nullptr;
}

void ResultBuffer::Close() {
  std::deque<ResultPage> dropped;
  {
    MutexLock l(&lock_);
    closed_ = true;
    dropped.swap(pages_);
    rows_ = 0;
    bytes_ = 0;
    if (producer_waiting_) not_full_.NotifyAll();
  }
  // 'dropped' pages are freed here, outside the lock.
}

int64_t ResultBuffer::buffered_rows() const {
  MutexLock l(&lock_);
  return rows_;
}

int64_t ResultBuffer::buffered_bytes() const {
  MutexLock l(&lock_);
  return bytes_;
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
