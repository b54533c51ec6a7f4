#pragma once

// The segment files of the query history, shared by its writer (query-history.cc) and its
// readers (query-history-read.cc). Internal to the daemon.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "util/status.h"

namespace qr::history_internal {

/// The index keeps a segment's number and a record's offset in 32 bits.
inline constexpr uint64_t kMaxSegmentSequence = UINT32_MAX;
inline constexpr uint64_t kMaxSegmentOffset = UINT32_MAX;

/// A segment file of the history, by sequence number.
struct Segment {
  uint64_t sequence;
  std::filesystem::path path;
};

/// The segments in 'dir', oldest first; files of other names are left alone. A segment's
/// name whose number the index cannot hold (above kMaxSegmentSequence), or that is not a
/// regular file (a directory, a FIFO), is not a segment this history wrote: it is skipped
/// with a warning, never read, deleted or counted.
Status ListSegments(const std::string& dir, std::vector<Segment>* out);

/// Reads the whole file 'path' into '*data' (a file cut short meanwhile: what there is);
/// false with strerror() in '*error'.
bool ReadWholeFile(const std::string& path, std::string* data, std::string* error);

}  // namespace qr::history_internal
