// Reading the query history back: the segments listed, read whole, checked and decoded (at
// start-up into the index, and by ReadQueryHistory()). The writer is query-history.cc.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <glog/logging.h>

#include "service/query-history-segments.h"
#include "service/query-history.h"

namespace qr {
namespace history_internal {
namespace {

namespace fs = std::filesystem;

constexpr char kPrefix[] = "history-";
constexpr char kSuffix[] = ".log";
constexpr size_t kSegmentDigits = 20;
constexpr size_t kSegmentNameBytes = sizeof(kPrefix) - 1 + kSegmentDigits + sizeof(kSuffix) - 1;

}  // namespace

Status ListSegments(const std::string& dir, std::vector<Segment>* out) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    return Internal("cannot list the query history directory " + dir + ": " + ec.message());
  }
  for (const fs::directory_entry& entry : it) {
    const std::string name = entry.path().filename().string();
    if (name.size() != kSegmentNameBytes || !name.starts_with(kPrefix) ||
        !name.ends_with(kSuffix)) {
      continue;
    }
    const std::string_view number =
        std::string_view(name).substr(sizeof(kPrefix) - 1, kSegmentDigits);
    uint64_t sequence = 0;
    const auto [end, err] =
        std::from_chars(number.data(), number.data() + number.size(), sequence);
    if (err == std::errc::invalid_argument || end != number.data() + number.size()) continue;
    std::error_code type_ec;
    if (err != std::errc() || sequence > kMaxSegmentSequence ||
        !entry.is_regular_file(type_ec)) {
      LOG(WARNING) << "Query history: " << entry.path().string()
                   << " is named like a segment but is not one this history writes (a number "
                      "above "
                   << kMaxSegmentSequence << ", or not a regular file); left alone";
      continue;
    }
    out->push_back({sequence, entry.path()});
  }
  std::sort(out->begin(), out->end(),
            [](const Segment& a, const Segment& b) { return a.sequence < b.sequence; });
  return Status::OK();
}

bool ReadWholeFile(const std::string& path, std::string* data, std::string* error) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = strerror(errno);
    return false;
  }
  struct stat st;
  bool ok = fstat(fd, &st) == 0;
  if (ok) {
    data->resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (ok && done < data->size()) {
      const ssize_t n = pread(fd, data->data() + done, data->size() - done,
                              static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        // A short file (truncated meanwhile): what there is.
        if (n == 0) data->resize(done);
        ok = n == 0;
        break;
      }
      done += static_cast<size_t>(n);
    }
  }
  if (!ok) *error = strerror(errno);
  close(fd);
  return ok;
}

}  // namespace history_internal

namespace {

namespace fs = std::filesystem;
using history_internal::ListSegments;
using history_internal::ReadWholeFile;
using history_internal::Segment;

/// Decodes the last 'keep' intact records of one segment's bytes, in order: every frame's
/// checksums are verified first (that finds torn tails and corruption), and only the records
/// kept are decoded.
void DecodeSegment(std::string_view data, size_t keep, std::vector<QueryHistoryRecord>* out,
                   HistoryReadStats* stats, const fs::path& path) {
  std::vector<size_t> offsets;
  size_t offset = 0;
  while (offset < data.size()) {
    size_t consumed = 0;
    HistoryFrameResult r = CheckHistoryFrame(data.substr(offset), &consumed);
    if (r == HistoryFrameResult::kTruncated) {
      ++stats->torn_tails;
      LOG(WARNING) << "Query history " << path.string() << ": torn tail at byte " << offset
                   << " of " << data.size() << " (a write cut short), skipped";
      break;
    }
    if (r == HistoryFrameResult::kCorrupt) {
      ++stats->corrupt_segments;
      LOG(WARNING) << "Query history " << path.string() << ": corrupt record at byte "
                   << offset << " of " << data.size() << "; the rest of the segment is skipped";
      break;
    }
    offsets.push_back(offset);
    offset += consumed;
  }
  const size_t first = offsets.size() > keep ? offsets.size() - keep : 0;
  for (size_t i = first; i < offsets.size(); ++i) {
    QueryHistoryRecord record;
    size_t consumed = 0;
    if (DecodeHistoryFrame(data.substr(offsets[i]), &record, &consumed) !=
        HistoryFrameResult::kOk) {
      // The checksum matched but the payload does not parse: not written by this version.
      ++stats->corrupt_segments;
      LOG(WARNING) << "Query history " << path.string() << ": undecodable record at byte "
                   << offsets[i] << ", skipped";
      continue;
    }
    out->push_back(std::move(record));
  }
}

}  // namespace

Status ReadQueryHistory(const std::string& dir, size_t max_records,
                        std::vector<QueryHistoryRecord>* out, HistoryReadStats* stats) {
  std::vector<Segment> segments;
  QR_RETURN_IF_ERROR(ListSegments(dir, &segments));
  // Newest segment first; each one's records are prepended to what is already collected.
  std::vector<std::vector<QueryHistoryRecord>> newest_first;
  size_t collected = 0;
  for (auto it = segments.rbegin(); it != segments.rend() && collected < max_records; ++it) {
    std::string data, error;
    if (!ReadWholeFile(it->path.string(), &data, &error)) {
      return Internal("cannot read query history segment " + it->path.string() + ": " + error);
    }
    ++stats->segments;
    stats->bytes += static_cast<int64_t>(data.size());
    std::vector<QueryHistoryRecord> records;
    DecodeSegment(data, max_records - collected, &records, stats, it->path);
    collected += records.size();
    newest_first.push_back(std::move(records));
  }
  for (auto it = newest_first.rbegin(); it != newest_first.rend(); ++it) {
    for (auto& record : *it) out->push_back(std::move(record));
  }
  if (out->size() > max_records) out->erase(out->begin(), out->end() - max_records);
  stats->records += static_cast<int64_t>(out->size());
  return Status::OK();
}

bool HistoryFileOps::ReadFile(const std::string& path, std::string* data, std::string* error) {
  return ReadWholeFile(path, data, error);
}

Status QueryHistory::BuildIndex() {
  std::vector<Segment> segments;
  QR_RETURN_IF_ERROR(ListSegments(options_.dir, &segments));
  std::string data;
  for (const Segment& segment : segments) {
    std::string error;
    if (!ops_->ReadFile(segment.path.string(), &data, &error)) {
      // One bad file (a failing sector, a restore with the wrong owner) costs its records,
      // not the daemon's start.
      ++index_stats_.unreadable_segments;
      LOG(ERROR) << "Query history: cannot read " << segment.path.string() << " (" << error
                 << "); its records are not listed, and retention deletes it in turn";
      continue;
    }
    ++index_stats_.segments;
    index_stats_.bytes += static_cast<int64_t>(data.size());
    size_t offset = 0;
    int64_t undecodable = 0;
    size_t first_undecodable = 0;
    while (offset < data.size()) {
      size_t consumed = 0;
      const std::string_view rest = std::string_view(data).substr(offset);
      const HistoryFrameResult r = CheckHistoryFrame(rest, &consumed);
      HistoryRecordSummary summary;
      if (r == HistoryFrameResult::kOk && !SummarizeHistoryFrame(rest, consumed, &summary)) {
        // Whole but not readable by this version (a newer one wrote it): skipped, counted
        // and logged once per segment below.
        if (undecodable++ == 0) first_undecodable = offset;
        offset += consumed;
        continue;
      }
      if (r == HistoryFrameResult::kTruncated) {
        ++index_stats_.torn_tails;
        LOG(WARNING) << "Query history " << segment.path.string() << ": torn tail at byte "
                     << offset << " of " << data.size() << " (a write cut short), skipped";
        break;
      }
      if (r == HistoryFrameResult::kCorrupt) {
        if (undecodable == 0) ++index_stats_.corrupt_segments;
        LOG(WARNING) << "Query history " << segment.path.string() << ": corrupt record at byte "
                     << offset << " of " << data.size() << "; the rest of the segment is skipped";
        break;
      }
      index_.Load(summary, segment.sequence, offset, consumed);
      ++index_stats_.records;
      offset += consumed;
    }
    if (undecodable > 0) {
      ++index_stats_.corrupt_segments;
      LOG(WARNING) << "Query history " << segment.path.string() << ": " << undecodable
                   << " records this version cannot decode (the first at byte "
                   << first_undecodable << "), skipped";
    }
  }
  index_.FinishLoad();  // in submit order from here on
  return Status::OK();
}

}  // namespace qr
