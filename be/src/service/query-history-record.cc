#include "service/query-history-record.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace qr {
namespace {

/// The payload's format version. Version 2 appends the exact submission (ns past the ms),
/// the executor start, the first row and who canceled when to version 1's fields; a reader
/// reads both and refuses others (as corrupt: nothing else wrote them).
constexpr uint8_t kPayloadVersion = 2;
constexpr uint8_t kPayloadVersion1 = 1;

constexpr std::array<uint32_t, 256> MakeCrc32cTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = MakeCrc32cTable();

void PutU32(uint32_t v, std::string* out) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, 4);
}
void PutI64(int64_t v, std::string* out) {
  char b[8];
  const auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(u >> (8 * i));
  out->append(b, 8);
}
void PutString(std::string_view s, std::string* out) {
  PutU32(static_cast<uint32_t>(s.size()), out);
  out->append(s);
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

/// Reads fields off the front of a payload; any read past the end sets 'failed'.
struct Reader {
  std::string_view in;
  bool failed = false;

  bool Take(size_t n, const char** p) {
    if (failed || in.size() < n) return !(failed = true);
    *p = in.data();
    in.remove_prefix(n);
    return true;
  }
  uint8_t U8() {
    const char* p;
    return Take(1, &p) ? static_cast<uint8_t>(*p) : 0;
  }
  uint32_t U32() {
    const char* p;
    return Take(4, &p) ? GetU32(p) : 0;
  }
  int64_t I64() {
    const char* p;
    if (!Take(8, &p)) return 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
    return static_cast<int64_t>(v);
  }
  std::string String() {
    const uint32_t n = U32();
    const char* p;
    return Take(n, &p) ? std::string(p, n) : std::string();
  }
};

void EncodeError(const QueryError& e, std::string* out);

/// A submission time the index can hold: its nanoseconds since the epoch (plus the extra
/// nanoseconds, hence the strict bound) fit in 64 bits.
bool ValidSubmitTime(int64_t ms) { return ms >= 0 && ms < kMaxNanosecondTimeMs; }
void EncodeVersion2Fields(const QueryHistoryRecord& r, std::string* out);

void EncodePayload(const QueryHistoryRecord& r, std::string* out) {
  out->push_back(static_cast<char>(kPayloadVersion));
  PutI64(static_cast<int64_t>(r.query_id.hi), out);
  PutI64(static_cast<int64_t>(r.query_id.lo), out);
  PutString(r.user, out);
  PutString(r.source, out);
  PutString(r.client_info, out);
  PutU32(static_cast<uint32_t>(r.client_tags.size()), out);
  for (const std::string& tag : r.client_tags) PutString(tag, out);
  PutString(r.statement ? std::string_view(*r.statement) : std::string_view(), out);
  out->push_back(static_cast<char>(r.state));
  for (int64_t v : {r.submit_time_ms, r.end_time_ms, r.queued_ms, r.elapsed_ms,
                    r.rows_delivered, r.bytes_delivered, r.rows_produced, r.cpu_time_ns}) {
    PutI64(v, out);
  }
  out->push_back(r.error ? 1 : 0);
  if (r.error) EncodeError(*r.error, out);
  EncodeVersion2Fields(r, out);
}

void EncodeError(const QueryError& e, std::string* out) {
  PutU32(static_cast<uint32_t>(e.code), out);
  PutString(e.name, out);
  out->push_back(static_cast<char>(e.type));
  PutString(e.message, out);
  PutU32(static_cast<uint32_t>(e.line), out);
  PutU32(static_cast<uint32_t>(e.column), out);
}

/// Version 2's fields, after version 1's.
void EncodeVersion2Fields(const QueryHistoryRecord& r, std::string* out) {
  PutU32(static_cast<uint32_t>(r.submit_time_extra_ns), out);
  PutI64(r.exec_start_ms, out);
  PutI64(r.first_row_ms, out);
  PutString(r.canceled_by, out);
  PutI64(r.canceled_time_ms, out);
}

bool DecodePayload(std::string_view payload, QueryHistoryRecord* r) {
  Reader in{payload};
  const uint8_t version = in.U8();
  if (version != kPayloadVersion && version != kPayloadVersion1) return false;
  r->query_id.hi = static_cast<uint64_t>(in.I64());
  r->query_id.lo = static_cast<uint64_t>(in.I64());
  r->user = in.String();
  r->source = in.String();
  r->client_info = in.String();
  const uint32_t tags = in.U32();
  // Each tag takes at least its 4-byte length: a larger count is corruption, not a reason
  // to reserve memory.
  if (tags > in.in.size() / 4) return false;
  r->client_tags.clear();
  for (uint32_t i = 0; i < tags && !in.failed; ++i) r->client_tags.push_back(in.String());
  r->statement = std::make_shared<const std::string>(in.String());
  r->state = in.U8();
  for (int64_t* v : {&r->submit_time_ms, &r->end_time_ms, &r->queued_ms, &r->elapsed_ms,
                     &r->rows_delivered, &r->bytes_delivered, &r->rows_produced,
                     &r->cpu_time_ns}) {
    *v = in.I64();
  }
  const uint8_t has_error = in.U8();
  r->error.reset();
  if (has_error == 1) {
    QueryError e;
    e.code = static_cast<int32_t>(in.U32());
    e.name = in.String();
    e.type = static_cast<ErrorType>(in.U8());
    e.message = in.String();
    e.line = static_cast<int>(in.U32());
    e.column = static_cast<int>(in.U32());
    r->error = std::move(e);
  } else if (has_error != 0) {
    return false;
  }
  r->submit_time_extra_ns = 0;
  r->exec_start_ms = -1;
  r->first_row_ms = -1;
  r->canceled_by.clear();
  r->canceled_time_ms = -1;
  if (version >= 2) {
    r->submit_time_extra_ns = static_cast<int32_t>(in.U32());
    if (r->submit_time_extra_ns < 0 || r->submit_time_extra_ns > 999999) return false;
    r->exec_start_ms = in.I64();
    r->first_row_ms = in.I64();
    r->canceled_by = in.String();
    r->canceled_time_ms = in.I64();
  }
  // The checksum matched, so a malformed payload is a bug or a foreign file: refuse it.
  return !in.failed && in.in.empty() && ValidSubmitTime(r->submit_time_ms);
}

}  // namespace

namespace {

uint32_t Crc32cSoftware(std::string_view data, uint32_t crc) {
  crc = ~crc;
  for (unsigned char c : data) crc = kCrc32cTable[(crc ^ c) & 0xff] ^ (crc >> 8);
  return ~crc;
}

#if defined(__x86_64__)
/// SSE 4.2's crc32 instruction computes CRC-32C, 8 bytes per instruction: start-up reads
/// the newest segments at memory speed instead of ~0.5 GB/s.
__attribute__((target("sse4.2"))) uint32_t Crc32cHardware(std::string_view data, uint32_t crc) {
  uint64_t c = ~crc;
  const char* p = data.data();
  size_t n = data.size();
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
  }
  auto c32 = static_cast<uint32_t>(c);
  for (; n > 0; ++p, --n) c32 = _mm_crc32_u8(c32, static_cast<unsigned char>(*p));
  return ~c32;
}
#endif

/// Fills in the header of the frame at 'header' in 'out', whose payload ends 'out'.
void FinishFrame(size_t header, std::string* out) {
  const std::string_view payload(out->data() + header + kHistoryFrameHeaderBytes,
                                 out->size() - header - kHistoryFrameHeaderBytes);
  std::string fields;
  PutU32(static_cast<uint32_t>(payload.size()), &fields);
  PutU32(Crc32c(payload), &fields);
  PutU32(Crc32c(std::string_view(fields.data(), 4)), &fields);
  std::memcpy(out->data() + header, fields.data(), kHistoryFrameHeaderBytes);
}

}  // namespace

uint32_t Crc32c(std::string_view data, uint32_t crc) {
#if defined(__x86_64__)
  static const bool hardware = __builtin_cpu_supports("sse4.2");
  if (hardware) return Crc32cHardware(data, crc);
#endif
  return Crc32cSoftware(data, crc);
}

void AppendHistoryFrame(std::string_view payload, std::string* out) {
  const size_t header = out->size();
  out->append(kHistoryFrameHeaderBytes, '\0');
  out->append(payload);
  FinishFrame(header, out);
}

namespace {

/// More than the payload's fixed-size fields and the lengths of its five strings.
constexpr size_t kFixedPayloadBytes = 256;

/// An upper bound of the record's payload size.
size_t PayloadBound(const QueryHistoryRecord& r) {
  size_t n = kFixedPayloadBytes + r.user.size() + r.source.size() + r.client_info.size() +
             r.canceled_by.size() + (r.statement ? r.statement->size() : 0);
  for (const std::string& tag : r.client_tags) n += 4 + tag.size();
  if (r.error) n += r.error->name.size() + r.error->message.size();
  return n;
}

/// The longest prefix of 'text' of at most 'max' bytes that does not end inside a UTF-8
/// character.
std::string CutUtf8(const std::string& text, size_t max) {
  if (text.size() <= max) return text;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n);
}

/// 'r' with its texts cut to the limits of kMaxHistoryPayloadBytes' comment.
QueryHistoryRecord CutToFit(const QueryHistoryRecord& r) {
  QueryHistoryRecord cut = r;
  if (r.statement && r.statement->size() > kMaxHistoryStatementBytes) {
    cut.statement =
        std::make_shared<const std::string>(CutUtf8(*r.statement, kMaxHistoryStatementBytes));
  }
  for (std::string* text : {&cut.user, &cut.source, &cut.client_info, &cut.canceled_by}) {
    *text = CutUtf8(*text, kMaxHistoryTextBytes);
  }
  if (cut.client_tags.size() > kMaxHistoryTags) cut.client_tags.resize(kMaxHistoryTags);
  for (std::string& tag : cut.client_tags) tag = CutUtf8(tag, kMaxHistoryTextBytes);
  if (cut.error) {
    cut.error->name = CutUtf8(cut.error->name, kMaxHistoryTextBytes);
    cut.error->message = CutUtf8(cut.error->message, kMaxHistoryTextBytes);
  }
  return cut;
}

static_assert(kFixedPayloadBytes + kMaxHistoryStatementBytes +
                  (6 + kMaxHistoryTags) * (4 + kMaxHistoryTextBytes) <=
              kMaxHistoryPayloadBytes);

}  // namespace

bool EncodeHistoryRecord(const QueryHistoryRecord& record, std::string* out) {
  const size_t header = out->size();
  out->append(kHistoryFrameHeaderBytes, '\0');
  const bool fits = PayloadBound(record) <= kMaxHistoryPayloadBytes;
  EncodePayload(fits ? record : CutToFit(record), out);
  FinishFrame(header, out);
  return fits;
}

HistoryFrameResult CheckHistoryFrame(std::string_view data, size_t* consumed) {
  if (data.size() < kHistoryFrameHeaderBytes) return HistoryFrameResult::kTruncated;
  const uint32_t length = GetU32(data.data());
  const uint32_t payload_crc = GetU32(data.data() + 4);
  const uint32_t length_crc = GetU32(data.data() + 8);
  if (Crc32c(data.substr(0, 4)) != length_crc || length > kMaxHistoryPayloadBytes) {
    return HistoryFrameResult::kCorrupt;
  }
  if (data.size() - kHistoryFrameHeaderBytes < length) return HistoryFrameResult::kTruncated;
  if (Crc32c(data.substr(kHistoryFrameHeaderBytes, length)) != payload_crc) {
    return HistoryFrameResult::kCorrupt;
  }
  *consumed = kHistoryFrameHeaderBytes + length;
  return HistoryFrameResult::kOk;
}

bool SummarizeHistoryFrame(std::string_view data, size_t size, HistoryRecordSummary* out) {
  Reader in{data.substr(kHistoryFrameHeaderBytes, size - kHistoryFrameHeaderBytes)};
  const uint8_t version = in.U8();
  if (version != kPayloadVersion && version != kPayloadVersion1) return false;
  out->query_id.hi = static_cast<uint64_t>(in.I64());
  out->query_id.lo = static_cast<uint64_t>(in.I64());
  auto view = [&in]() {
    const uint32_t n = in.U32();
    const char* p = nullptr;
    return in.Take(n, &p) ? std::string_view(p, n) : std::string_view();
  };
  out->user = view();
  out->source = view();
  view();  // client info
  const uint32_t tags = in.U32();
  if (tags > in.in.size() / 4) return false;
  for (uint32_t i = 0; i < tags && !in.failed; ++i) view();
  view();  // statement
  out->state = in.U8();
  out->submit_time_ms = in.I64();
  in.I64();  // end time
  in.I64();  // queued
  out->elapsed_ms = in.I64();
  out->rows_delivered = in.I64();
  out->submit_time_extra_ns = 0;
  if (version >= 2 && !in.failed) {
    // After the counters and the error, whose size varies: skip them.
    for (int i = 0; i < 3; ++i) in.I64();
    const uint8_t has_error = in.U8();
    if (has_error == 1) {
      in.U32();
      view();
      in.U8();
      view();
      in.U32();
      in.U32();
    }
    out->submit_time_extra_ns = static_cast<int32_t>(in.U32());
  }
  return !in.failed && ValidSubmitTime(out->submit_time_ms);
}

HistoryFrameResult DecodeHistoryFrame(std::string_view data, QueryHistoryRecord* record,
                                      size_t* consumed) {
  size_t size = 0;
  HistoryFrameResult r = CheckHistoryFrame(data, &size);
  if (r != HistoryFrameResult::kOk) return r;
  const std::string_view payload =
      data.substr(kHistoryFrameHeaderBytes, size - kHistoryFrameHeaderBytes);
  if (!DecodePayload(payload, record)) return HistoryFrameResult::kCorrupt;
  *consumed = size;
  return HistoryFrameResult::kOk;
}

}  // namespace qr
