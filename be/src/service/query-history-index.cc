#include "service/query-history-index.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <queue>
#include <unordered_set>

namespace qr {
namespace {

/// Maps submit times to Scan() positions, keeping their order.
constexpr uint64_t kSignBit = uint64_t{1} << 63;

/// The index's order: submission, then id.
bool KeyLess(const HistoryIndexEntry& a, const HistoryIndexEntry& b) {
  return a.submit_ns != b.submit_ns ? a.submit_ns < b.submit_ns : a.query_id < b.query_id;
}

/// How far back from the end Load() inserts an entry that came out of order; beyond, it is
/// merged in by FinishLoad().
constexpr size_t kLoadInsertReach = 256;

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
  if (it != name_numbers_.end()) {
    ++name_refs_[it->second];
    return it->second;
  }
  uint32_t number;
  if (!free_names_.empty()) {
    number = free_names_.back();
    free_names_.pop_back();
    names_[number] = name;
  } else {
    number = static_cast<uint32_t>(names_.size());
    names_.emplace_back(name);
    name_refs_.push_back(0);
  }
  name_refs_[number] = 1;
  name_numbers_.emplace(std::string(name), number);
  name_bytes_ += 2 * (name.size() + sizeof(std::string)) + 16;
  return number;
}

void HistoryIndex::ReleaseNameLocked(uint32_t number) {
  if (--name_refs_[number] > 0) return;
  std::string& name = names_[number];
  name_bytes_ -= 2 * (name.size() + sizeof(std::string)) + 16;
  name_numbers_.erase(name);
  std::string().swap(name);
  free_names_.push_back(number);
}

bool HistoryIndex::MakeEntryLocked(const HistoryRecordSummary& record, uint64_t segment,
                                   uint64_t offset, size_t length, HistoryIndexEntry* e) {
  if (offset > UINT32_MAX || segment > UINT32_MAX || length > UINT32_MAX) return false;
  e->query_id = record.query_id;
  e->submit_ns = record.submit_time_ms * 1000000 + record.submit_time_extra_ns;
  e->elapsed_ms = record.elapsed_ms;
  e->rows_delivered = record.rows_delivered;
  e->segment = static_cast<uint32_t>(segment);
  e->offset = static_cast<uint32_t>(offset);
  e->length = static_cast<uint32_t>(length);
  e->state = record.state;
  e->user = InternLocked(record.user);
  e->source = InternLocked(record.source);
  auto [last, added] = segment_last_submit_.try_emplace(e->segment, e->submit_ns);
  if (!added) last->second = std::max(last->second, e->submit_ns);
  return true;
}

void HistoryIndex::Load(const HistoryRecordSummary& record, uint64_t segment, uint64_t offset,
                        size_t length) {
  MutexLock l(&lock_);
  HistoryIndexEntry e;
  if (!MakeEntryLocked(record, segment, offset, length, &e)) return;
  if (entries_.empty() || !KeyLess(e, entries_.back())) {
    entries_.push_back(e);
    return;
  }
  // Out of order: a short way back is inserted at once (a query that completed a little
  // after others submitted later); farther back (a long query), kept aside for FinishLoad().
  size_t at = entries_.size() - 1;
  const size_t stop = entries_.size() > kLoadInsertReach ? entries_.size() - kLoadInsertReach : 0;
  while (at > stop && KeyLess(e, entries_[at - 1])) --at;
  if (at > 0 && KeyLess(e, entries_[at - 1])) {
    late_.push_back(e);
    return;
  }
  entries_.insert(entries_.begin() + static_cast<ptrdiff_t>(at), e);
}

void HistoryIndex::FinishLoad() {
  MutexLock l(&lock_);
  if (late_.empty()) return;
  // Merge the late entries in from the back: each entry moves once.
  std::sort(late_.begin(), late_.end(), KeyLess);
  size_t read = entries_.size();
  entries_.resize(entries_.size() + late_.size());
  size_t write = entries_.size();
  for (size_t k = late_.size(); k > 0;) {
    if (read > 0 && KeyLess(late_[k - 1], entries_[read - 1])) {
      entries_[--write] = entries_[--read];
    } else {
      entries_[--write] = late_[--k];
    }
  }
  late_.clear();
  late_.shrink_to_fit();
}

void HistoryIndex::Add(const HistoryRecordSummary& record, uint64_t segment, uint64_t offset,
                       size_t length) {
  MutexLock l(&lock_);
  HistoryIndexEntry e;
  if (!MakeEntryLocked(record, segment, offset, length, &e)) return;
  if (entries_.empty() || !KeyLess(e, entries_.back())) {
    entries_.push_back(e);
    return;
  }
  // Submitted before a query that completed earlier: its place is near the end. Gallop back
  // from the end, then search the last step.
  size_t step = 1;
  size_t low = entries_.size();
  while (low > 0 && KeyLess(e, entries_[low - 1])) {
    low = low > step ? low - step : 0;
    step *= 2;
  }
  const auto first = entries_.begin() + static_cast<ptrdiff_t>(low);
  entries_.insert(std::upper_bound(first, entries_.end(), e, KeyLess), e);
}

void HistoryIndex::DropSegment(uint64_t segment) {
  MutexLock l(&lock_);
  auto last = segment_last_submit_.find(static_cast<uint32_t>(segment));
  if (last == segment_last_submit_.end()) return;
  // The segment's entries are all submitted by its latest submission: in the prefix up to it,
  // which for the oldest segment (what retention deletes) is about the segment's own entries
  // plus the few of newer segments submitted meanwhile. Its other entries move back over the
  // deleted ones, and the front is erased.
  const int64_t bound = last->second;
  segment_last_submit_.erase(last);
  const size_t end = static_cast<size_t>(
      std::upper_bound(entries_.begin(), entries_.end(), bound,
                       [](int64_t ns, const HistoryIndexEntry& e) { return ns < e.submit_ns; }) -
      entries_.begin());
  size_t write = end;
  for (size_t read = end; read > 0; --read) {
    const HistoryIndexEntry& e = entries_[read - 1];
    if (e.segment != segment) {
      entries_[--write] = e;
    } else {
      ReleaseNameLocked(e.user);
      ReleaseNameLocked(e.source);
    }
  }
  entries_.erase(entries_.begin(), entries_.begin() + static_cast<ptrdiff_t>(write));
}

HistorySelection HistoryIndex::Select(const HistorySelectParams& p) const {
  MutexLock l(&lock_);
  if (p.user && !name_numbers_.contains(*p.user)) return HistorySelection();
  if (p.source && !name_numbers_.contains(*p.source)) return HistorySelection();
  // Each name's visibility once (users and sources share the table: a few calls too many).
  std::vector<int8_t> visible;
  if (p.visible) {
    visible.resize(names_.size());
    bool all = true;
    for (size_t i = 0; i < names_.size(); ++i) {
      // A free number is no entry's: not asked about.
      visible[i] = name_refs_[i] == 0 || p.visible(names_[i]) ? 1 : 0;
      all = all && visible[i] == 1;
    }
    if (all) visible.clear();
  }
  if (p.sort == HistorySelectParams::Sort::kStart && !p.user && !p.source && p.states.empty() &&
      visible.empty()) {
    return SelectByStartLocked(p);
  }
  return SelectByPassLocked(p, visible);
}

HistorySelection HistoryIndex::SelectByStartLocked(const HistorySelectParams& p) const {
  HistorySelection out;
  const int64_t since_ns = p.since_ms ? *p.since_ms * 1000000 : INT64_MIN;
  const int64_t until_ns = p.until_ms ? *p.until_ms * 1000000 : INT64_MAX;
  auto ns_less = [](const HistoryIndexEntry& e, int64_t ns) { return e.submit_ns < ns; };
  auto lo = std::lower_bound(entries_.begin(), entries_.end(), since_ns, ns_less);
  auto hi = p.until_ms ? std::lower_bound(lo, entries_.end(), until_ns, ns_less)
                       : entries_.end();
  if (lo >= hi) return out;
  // The excluded queries that are in the range are not counted: each looked up by its key.
  std::unordered_set<UniqueId> excluded;
  excluded.reserve(p.exclude.size());
  size_t excluded_in_range = 0;
  for (const auto& [ns, id] : p.exclude) {
    if (!excluded.insert(id).second || ns < since_ns || ns >= until_ns) continue;
    HistoryIndexEntry key;
    key.submit_ns = ns;
    key.query_id = id;
    auto it = std::lower_bound(lo, hi, key, KeyLess);
    if (it != hi && it->submit_ns == ns && it->query_id == id) ++excluded_in_range;
  }
  out.matched = static_cast<size_t>(hi - lo) - excluded_in_range;
  if (p.after) {
    HistoryIndexEntry key;
    key.submit_ns = p.after->first;
    key.query_id = p.after->second;
    // Strictly after the cursor in the order: above it ascending, below it descending.
    if (p.ascending) {
      lo = std::max(lo, std::upper_bound(lo, hi, key, KeyLess));
    } else {
      hi = std::min(hi, std::lower_bound(lo, hi, key, KeyLess));
    }
  }
  auto keep = [&](const HistoryIndexEntry& e) {
    if (excluded.contains(e.query_id)) return;
    out.rows.emplace_back(e.submit_ns, e);
  };
  if (p.ascending) {
    for (auto it = lo; it < hi && out.rows.size() < p.limit; ++it) keep(*it);
  } else {
    for (auto it = hi; it > lo && out.rows.size() < p.limit; --it) keep(*(it - 1));
  }
  return out;
}

HistorySelection HistoryIndex::SelectByPassLocked(const HistorySelectParams& p,
                                                  const std::vector<int8_t>& visible) const {
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
  // Names to numbers once (Select() checked that they exist).
  std::optional<uint32_t> user, source;
  if (p.user) user = name_numbers_.at(*p.user);
  if (p.source) source = name_numbers_.at(*p.source);
  std::unordered_set<UniqueId> excluded;
  excluded.reserve(p.exclude.size());
  for (const auto& key : p.exclude) excluded.insert(key.second);
  for (const HistoryIndexEntry& e : entries_) {
    if (user && e.user != *user) continue;
    if (source && e.source != *source) continue;
    if (e.submit_ns < since_ns || e.submit_ns >= until_ns) continue;
    if (!p.states.empty() &&
        std::find(p.states.begin(), p.states.end(), e.state) == p.states.end()) {
      continue;
    }
    if (!visible.empty() && visible[e.user] == 0) continue;
    if (!excluded.empty() && excluded.contains(e.query_id)) continue;
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

uint64_t HistoryIndex::Scan(uint64_t position, size_t max, size_t max_bytes,
                            const std::function<void(const HistoryIndexEntry&)>& fn) const {
  MutexLock l(&lock_);
  // Position 0 is INT64_MIN: the order of positions is the order of submit times.
  const auto from = static_cast<int64_t>(position ^ kSignBit);
  auto it = std::lower_bound(
      entries_.begin(), entries_.end(), from,
      [](const HistoryIndexEntry& e, int64_t ns) { return e.submit_ns < ns; });
  if (it == entries_.end()) return position;
  size_t n = 0;
  size_t bytes = 0;
  int64_t last = it->submit_ns;
  for (; it != entries_.end() && ((n < max && (n == 0 || bytes < max_bytes)) ||
                                  it->submit_ns == last);
       ++it, ++n) {
    fn(*it);
    bytes += it->length;
    last = it->submit_ns;
  }
  if (last == INT64_MAX) return UINT64_MAX;  // nothing can follow
  return static_cast<uint64_t>(last + 1) ^ kSignBit;
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
