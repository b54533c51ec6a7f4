#include "service/query-history-index.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <queue>

namespace qr {
namespace {

/// Ranges of one segment closer than this are read with one pread(2).
constexpr uint64_t kCoalesceGapBytes = 64 << 10;

int64_t SortKey(HistorySelectParams::Sort sort, const HistoryIndexEntry& e) {
  switch (sort) {
    case HistorySelectParams::Sort::kStart: return e.submit_ns;
    case HistorySelectParams::Sort::kDuration: return e.elapsed_ms;
    case HistorySelectParams::Sort::kRows: return e.rows_delivered;
  }
  return 0;
}

/// Reads [offset, offset + size) of 'fd' into 'out'; false on an error or a short file.
bool PreadFully(int fd, uint64_t offset, size_t size, std::string* out) {
  out->resize(size);
  size_t done = 0;
  while (done < size) {
    ssize_t n = pread(fd, out->data() + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string HistorySegmentName(uint64_t sequence) {
  char name[64];
  snprintf(name, sizeof(name), "history-%020" PRIu64 ".log", sequence);
  return name;
}

uint32_t HistoryIndex::InternLocked(std::string_view name) {
  auto it = name_numbers_.find(std::string(name));
  if (it != name_numbers_.end()) return it->second;
  const auto number = static_cast<uint32_t>(names_.size());
  names_.emplace_back(name);
  name_numbers_.emplace(std::string(name), number);
  name_bytes_ += 2 * (name.size() + sizeof(std::string)) + 16;
  return number;
}

void HistoryIndex::Add(const HistoryRecordSummary& record, uint64_t segment, uint64_t offset,
                       size_t length) {
  if (offset > UINT32_MAX || segment > UINT32_MAX || length > UINT32_MAX) return;
  HistoryIndexEntry e;
  e.query_id = record.query_id;
  e.submit_ns = record.submit_time_ms * 1000000 + record.submit_time_extra_ns;
  e.elapsed_ms = record.elapsed_ms;
  e.rows_delivered = record.rows_delivered;
  e.segment = static_cast<uint32_t>(segment);
  e.offset = static_cast<uint32_t>(offset);
  e.length = static_cast<uint32_t>(length);
  e.state = record.state;
  MutexLock l(&lock_);
  e.user = InternLocked(record.user);
  e.source = InternLocked(record.source);
  entries_.push_back(e);
}

void HistoryIndex::DropSegment(uint64_t segment) {
  MutexLock l(&lock_);
  // Retention deletes the oldest segments: their entries are at the front.
  size_t front = 0;
  while (front < entries_.size() && entries_[front].segment == segment) ++front;
  entries_.erase(entries_.begin(), entries_.begin() + static_cast<ptrdiff_t>(front));
  dropped_front_ += front;
  // One deleted out of order (an earlier deletion failed) is erased wherever it is; Scan()
  // positions after it shift, which at worst repeats or skips rows of a scan running then.
  std::erase_if(entries_, [segment](const HistoryIndexEntry& e) { return e.segment == segment; });
}

HistorySelection HistoryIndex::Select(const HistorySelectParams& p) const {
  HistorySelection out;
  auto before = [&p](const std::pair<int64_t, HistoryIndexEntry>& a,
                     const std::pair<int64_t, HistoryIndexEntry>& b) {
    if (a.first != b.first) return p.ascending ? a.first < b.first : a.first > b.first;
    return p.ascending ? a.second.query_id < b.second.query_id
                       : b.second.query_id < a.second.query_id;
  };
  // The best 'limit' so far, the worst on top.
  std::priority_queue<std::pair<int64_t, HistoryIndexEntry>,
                      std::vector<std::pair<int64_t, HistoryIndexEntry>>, decltype(before)>
      best(before);
  const int64_t since_ns = p.since_ms ? *p.since_ms * 1000000 : INT64_MIN;
  const int64_t until_ns = p.until_ms ? *p.until_ms * 1000000 : INT64_MAX;
  MutexLock l(&lock_);
  // Names to numbers once, and each user's visibility once.
  std::optional<uint32_t> user, source;
  if (p.user) {
    auto it = name_numbers_.find(*p.user);
    if (it == name_numbers_.end()) return out;
    user = it->second;
  }
  if (p.source) {
    auto it = name_numbers_.find(*p.source);
    if (it == name_numbers_.end()) return out;
    source = it->second;
  }
  std::vector<int8_t> visible(p.visible ? names_.size() : 0, -1);
  for (const HistoryIndexEntry& e : entries_) {
    if (user && e.user != *user) continue;
    if (source && e.source != *source) continue;
    if (e.submit_ns < since_ns || e.submit_ns >= until_ns) continue;
    if (!p.states.empty() &&
        std::find(p.states.begin(), p.states.end(), e.state) == p.states.end()) {
      continue;
    }
    if (p.visible) {
      int8_t& v = visible[e.user];
      if (v < 0) v = p.visible(names_[e.user]) ? 1 : 0;
      if (v == 0) continue;
    }
    if (p.exclude && p.exclude(e.query_id)) continue;
    ++out.matched;
    std::pair<int64_t, HistoryIndexEntry> row{SortKey(p.sort, e), e};
    if (p.after) {
      const std::pair<int64_t, HistoryIndexEntry> cursor{p.after->first,
                                                         HistoryIndexEntry{p.after->second}};
      if (!before(cursor, row)) continue;
    }
    if (p.limit == 0) continue;
    if (best.size() < p.limit) {
      best.push(row);
    } else if (before(row, best.top())) {
      best.pop();
      best.push(row);
    }
  }
  out.rows.resize(best.size());
  for (size_t i = best.size(); i > 0; --i) {
    out.rows[i - 1] = best.top();
    best.pop();
  }
  return out;
}

uint64_t HistoryIndex::Scan(uint64_t position, size_t max,
                            const std::function<void(const HistoryIndexEntry&)>& fn) const {
  MutexLock l(&lock_);
  uint64_t i = position > dropped_front_ ? position - dropped_front_ : 0;
  size_t n = 0;
  for (; i < entries_.size() && n < max; ++i, ++n) fn(entries_[i]);
  return dropped_front_ + i;
}

std::vector<HistoryIndexEntry> HistoryIndex::Newest(size_t n) const {
  MutexLock l(&lock_);
  const size_t first = entries_.size() > n ? entries_.size() - n : 0;
  return std::vector<HistoryIndexEntry>(entries_.begin() + static_cast<ptrdiff_t>(first),
                                        entries_.end());
}

std::optional<HistoryIndexEntry> HistoryIndex::Find(const UniqueId& id) const {
  MutexLock l(&lock_);
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->query_id == id) return *it;
  }
  return std::nullopt;
}

std::string HistoryIndex::Name(uint32_t number) const {
  MutexLock l(&lock_);
  return number < names_.size() ? names_[number] : std::string();
}

size_t HistoryIndex::size() const {
  MutexLock l(&lock_);
  return entries_.size();
}

size_t HistoryIndex::MemoryBytes() const {
  MutexLock l(&lock_);
  return entries_.size() * sizeof(HistoryIndexEntry) + name_bytes_;
}

void ReadHistoryRecords(const std::string& dir, const std::vector<HistoryIndexEntry>& entries,
                        std::vector<std::optional<QueryHistoryRecord>>* out) {
  out->assign(entries.size(), std::nullopt);
  // By segment and offset; each segment opened once, its nearby records read at once.
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&entries](size_t a, size_t b) {
    const HistoryIndexEntry& x = entries[a];
    const HistoryIndexEntry& y = entries[b];
    return x.segment != y.segment ? x.segment < y.segment : x.offset < y.offset;
  });
  std::string buffer;
  for (size_t i = 0; i < order.size();) {
    const uint32_t segment = entries[order[i]].segment;
    size_t end = i;
    while (end < order.size() && entries[order[end]].segment == segment) ++end;
    const std::string path = (std::filesystem::path(dir) / HistorySegmentName(segment)).string();
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    while (fd >= 0 && i < end) {
      // One range: records less than kCoalesceGapBytes apart.
      size_t last = i;
      uint64_t range_end = uint64_t{entries[order[i]].offset} + entries[order[i]].length;
      while (last + 1 < end && entries[order[last + 1]].offset <= range_end + kCoalesceGapBytes) {
        ++last;
        range_end = std::max<uint64_t>(
            range_end, uint64_t{entries[order[last]].offset} + entries[order[last]].length);
      }
      const uint64_t range_start = entries[order[i]].offset;
      if (PreadFully(fd, range_start, range_end - range_start, &buffer)) {
        for (size_t k = i; k <= last; ++k) {
          const HistoryIndexEntry& e = entries[order[k]];
          QueryHistoryRecord record;
          size_t consumed = 0;
          const std::string_view frame =
              std::string_view(buffer).substr(e.offset - range_start, e.length);
          if (DecodeHistoryFrame(frame, &record, &consumed) == HistoryFrameResult::kOk &&
              record.query_id == e.query_id) {
            (*out)[order[k]] = std::move(record);
          }
        }
      }
      i = last + 1;
    }
    if (fd >= 0) close(fd);
    i = end;
  }
}

}  // namespace qr
