#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

/// The request bodies and response fields of etcd's v3 HTTP/JSON gateway (etcd 3.4: the
/// grpc-gateway over the v3 gRPC API). Keys and values travel as base64; 64-bit integers are
/// JSON strings both ways (the gateway writes them so, and accepts them so). Fields equal to
/// their proto3 default (0, false, "") are omitted from responses.
/// Thread-safety: pure functions.

namespace qr::etcd {

/// One key-value pair of a range response or a watch event.
struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;
};

/// One event of a watch response.
struct WatchEvent {
  bool is_delete = false;
  KeyValue kv;
};

/// The end of the range of every key that starts with 'prefix' (etcd's "prefix end": the
/// prefix with its last byte below 0xff incremented and the rest dropped; "\0" for all keys).
std::string PrefixEnd(std::string_view prefix);

/// POST /v3/lease/grant.
std::string LeaseGrantRequest(int64_t ttl_s);
/// POST /v3/lease/keepalive and /v3/lease/revoke.
std::string LeaseIdRequest(int64_t lease_id);
/// POST /v3/kv/range over every key starting with 'prefix'.
std::string RangePrefixRequest(std::string_view prefix);
/// POST /v3/kv/txn: put 'key' = 'value' on 'lease_id' only if 'key' does not exist (its
/// create revision is 0): the claim of a member id. With a non-empty 'also_key', the same
/// success branch also puts 'also_key' = 'also_value' with no lease (the claim cursor).
std::string PutIfAbsentRequest(std::string_view key, std::string_view value, int64_t lease_id,
                               std::string_view also_key = {}, std::string_view also_value = {});
/// POST /v3/kv/deleterange of one key.
std::string DeleteKeyRequest(std::string_view key);
/// POST /v3/watch: a create request for every key starting with 'prefix', from revision
/// 'start_revision' on.
std::string WatchPrefixRequest(std::string_view prefix, int64_t start_revision);

/// A lease grant's response: its ID and granted TTL.
Status ParseLeaseGrant(std::string_view body, int64_t* lease_id, int64_t* ttl_s);
/// A keep-alive's response ({"result": {...}}): the TTL left, 0 when the lease is gone.
Status ParseKeepAlive(std::string_view body, int64_t* ttl_s);
/// A transaction's response: whether its comparisons held.
Status ParseTxnSucceeded(std::string_view body, bool* succeeded);
/// A range response: its key-values and the store's revision at the read.
Status ParseRange(std::string_view body, std::vector<KeyValue>* kvs, int64_t* revision);
/// One message of a watch stream ({"result": {...}} or {"error": {...}}): its events; an
/// error for an error message, or a canceled watch (compacted past 'start_revision').
Status ParseWatchMessage(std::string_view body, std::vector<WatchEvent>* events,
                         int64_t* revision);

}  // namespace qr::etcd
