#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/query-error.h"
#include "util/unique-id.h"

namespace qr {

/// The latest time, in milliseconds since the Unix epoch (2262-04-11T23:47:16.854Z), whose
/// nanoseconds since the epoch fit in 64 bits: the history's index and the query lists compare
/// submission times in nanoseconds.
inline constexpr int64_t kMaxNanosecondTimeMs = INT64_MAX / 1000000;

/// One completed query as the durable history keeps it (docs/operations.md#query-history):
/// who ran what, how it ended, when, and what it cost. Plain data; the statement is shared
/// with the request that produced it, so handing a record to the writer copies no SQL text.
struct QueryHistoryRecord {
  UniqueId query_id;
  std::string user;
  std::string source;
  std::string client_info;
  std::vector<std::string> client_tags;
  std::shared_ptr<const std::string> statement;
  /// ClientRequestState::State of the terminal state (FINISHED, FAILED, CANCELED).
  uint8_t state = 0;
  /// Wall clock, milliseconds since the Unix epoch.
  int64_t submit_time_ms = 0;
  int64_t end_time_ms = 0;
  /// Nanoseconds past 'submit_time_ms' (0 to 999,999): the exact submission, so that a query
  /// sorts the same in the completed-query log and in the history. Version 2; 0 in version 1.
  int32_t submit_time_extra_ns = 0;
  /// When an executor thread started the statement and when the client was handed its first
  /// row (wall clock, ms since the epoch); -1: never (or a version 1 record).
  int64_t exec_start_ms = -1;
  int64_t first_row_ms = -1;
  /// A CANCELED query: who canceled it (ClientRequestState::Info::canceled_by) and when
  /// (ms since the epoch); empty and -1 otherwise (and in a version 1 record).
  std::string canceled_by;
  int64_t canceled_time_ms = -1;
  int64_t queued_ms = 0;
  int64_t elapsed_ms = 0;
  int64_t rows_delivered = 0;
  int64_t bytes_delivered = 0;
  int64_t rows_produced = 0;
  int64_t cpu_time_ns = 0;
  std::optional<QueryError> error;
};

/// CRC-32C (Castagnoli) of 'data', continuing from 'crc' (0 to start).
uint32_t Crc32c(std::string_view data, uint32_t crc = 0);

/// The on-disk framing of one record: a 12-byte header (payload length, CRC-32C of the
/// payload, CRC-32C of the length) followed by the payload. The length has its own checksum
/// so that a torn or corrupt length is never trusted to skip ahead.
constexpr size_t kHistoryFrameHeaderBytes = 12;
/// A record's payload is at most this large; a longer length is corruption. A record that
/// would not fit (--max_statement_bytes and --max_header_bytes go up to 1 GiB) is written with
/// its statement cut to kMaxHistoryStatementBytes, its other texts (user, source, client
/// info, each client tag, who canceled, the error's name and message) to
/// kMaxHistoryTextBytes and its tags to the first kMaxHistoryTags, each cut at a UTF-8
/// character boundary.
constexpr uint32_t kMaxHistoryPayloadBytes = 64u << 20;
constexpr size_t kMaxHistoryStatementBytes = 32u << 20;
constexpr size_t kMaxHistoryTextBytes = 64u << 10;
constexpr size_t kMaxHistoryTags = 64;

/// Appends 'record', framed, to 'out' (payload version 2); false if it had to be cut to fit
/// (see kMaxHistoryPayloadBytes).
bool EncodeHistoryRecord(const QueryHistoryRecord& record, std::string* out);
/// Frames 'payload' (as EncodeHistoryRecord() does its own) and appends it to 'out'; tests
/// use it to write records of earlier versions.
void AppendHistoryFrame(std::string_view payload, std::string* out);

/// The fields of a record that the history's index keeps (query-history-index.h), read
/// without copying: the views point into the payload.
struct HistoryRecordSummary {
  UniqueId query_id;
  std::string_view user;
  std::string_view source;
  uint8_t state = 0;
  int64_t submit_time_ms = 0;
  int32_t submit_time_extra_ns = 0;
  int64_t elapsed_ms = 0;
  int64_t rows_delivered = 0;
};
/// Reads the summary of the frame at the start of 'data', whose checksums
/// CheckHistoryFrame() has verified ('size' is the frame's size); false if the payload does
/// not parse.
bool SummarizeHistoryFrame(std::string_view data, size_t size, HistoryRecordSummary* out);

/// What DecodeHistoryFrame() found at an offset.
enum class HistoryFrameResult {
  kOk,         // a record; '*consumed' bytes were used
  kTruncated,  // the data ends inside a frame (a torn tail after a crash)
  kCorrupt,    // a checksum or a field does not match
};

/// Checks the frame at the start of 'data' (its length and both checksums) without decoding
/// it; '*consumed' is its size when kOk.
HistoryFrameResult CheckHistoryFrame(std::string_view data, size_t* consumed);

/// Decodes the frame at the start of 'data' into 'record'.
HistoryFrameResult DecodeHistoryFrame(std::string_view data, QueryHistoryRecord* record,
                                      size_t* consumed);

}  // namespace qr
