#include "cluster/etcd-json.h"

#include <charconv>

#include <nlohmann/json.hpp>

#include "http/base64.h"

namespace qr::etcd {
namespace {

using nlohmann::json;

std::string Int(int64_t v) { return std::to_string(v); }

/// A 64-bit integer field: a JSON string of digits (the gateway's form) or a number; absent
/// is 0 (the proto3 default). False when present but neither.
bool GetInt(const json& obj, const char* field, int64_t* out) {
  *out = 0;
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return true;
  if (it->is_number_integer()) {
    *out = it->get<int64_t>();
    return true;
  }
  if (!it->is_string()) return false;
  const std::string& s = it->get_ref<const std::string&>();
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

/// A base64 field; absent is "".
bool GetBytes(const json& obj, const char* field, std::string* out) {
  out->clear();
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return true;
  return it->is_string() && Base64Decode(it->get_ref<const std::string&>(), out);
}

Status Parse(std::string_view body, json* out) {
  *out = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded() || !out->is_object()) {
    return InvalidArgument("etcd answered with something other than a JSON object: " +
                           QuoteForError(body));
  }
  // The gateway's error shape: {"error": "...", "code": N, "message": "..."}.
  auto err = out->find("error");
  if (err != out->end()) {
    std::string message = err->is_string() ? err->get<std::string>() : err->dump();
    if (err->is_object() && err->contains("message") && (*err)["message"].is_string()) {
      message = (*err)["message"].get<std::string>();
    }
    return Status(StatusCode::kUnavailable, "etcd error: " + QuoteForError(message, 200));
  }
  return Status::OK();
}

Status Malformed(const char* what, std::string_view body) {
  return InvalidArgument(std::string("etcd's ") + what + " is malformed: " +
                         QuoteForError(body));
}

bool ParseKeyValue(const json& j, KeyValue* kv) {
  return j.is_object() && GetBytes(j, "key", &kv->key) && GetBytes(j, "value", &kv->value) &&
         GetInt(j, "create_revision", &kv->create_revision) &&
         GetInt(j, "mod_revision", &kv->mod_revision) && GetInt(j, "lease", &kv->lease);
}

int64_t HeaderRevision(const json& j) {
  int64_t revision = 0;
  auto h = j.find("header");
  if (h != j.end() && h->is_object() && !GetInt(*h, "revision", &revision)) return 0;
  return revision;
}

}  // namespace

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

std::string LeaseGrantRequest(int64_t ttl_s) {
  return json{{"TTL", Int(ttl_s)}, {"ID", "0"}}.dump();
}

std::string LeaseIdRequest(int64_t lease_id) { return json{{"ID", Int(lease_id)}}.dump(); }

std::string RangePrefixRequest(std::string_view prefix) {
  return json{{"key", Base64Encode(prefix)}, {"range_end", Base64Encode(PrefixEnd(prefix))}}
      .dump();
}

std::string PutIfAbsentRequest(std::string_view key, std::string_view value, int64_t lease_id,
                               std::string_view also_key, std::string_view also_value) {
  const std::string k = Base64Encode(key);
  json compare = {{"key", k}, {"result", "EQUAL"}, {"target", "CREATE"},
                  {"create_revision", "0"}};
  json put = {{"request_put", {{"key", k}, {"value", Base64Encode(value)},
                               {"lease", Int(lease_id)}}}};
  json success = json::array({put});
  if (!also_key.empty()) {
    json also = {{"request_put", {{"key", Base64Encode(also_key)},
                                  {"value", Base64Encode(also_value)}}}};
    success.push_back(std::move(also));
  }
  return json{{"compare", json::array({compare})}, {"success", std::move(success)},
              {"failure", json::array()}}
      .dump();
}

std::string DeleteKeyRequest(std::string_view key) {
  return json{{"key", Base64Encode(key)}}.dump();
}

std::string WatchPrefixRequest(std::string_view prefix, int64_t start_revision) {
  return json{{"create_request",
               {{"key", Base64Encode(prefix)},
                {"range_end", Base64Encode(PrefixEnd(prefix))},
                {"start_revision", Int(start_revision)}}}}
      .dump();
}

Status ParseLeaseGrant(std::string_view body, int64_t* lease_id, int64_t* ttl_s) {
  json j;
  QR_RETURN_IF_ERROR(Parse(body, &j));
  if (!GetInt(j, "ID", lease_id) || !GetInt(j, "TTL", ttl_s) || *lease_id == 0) {
    return Malformed("lease grant", body);
  }
  return Status::OK();
}

Status ParseKeepAlive(std::string_view body, int64_t* ttl_s) {
  json j;
  QR_RETURN_IF_ERROR(Parse(body, &j));
  auto result = j.find("result");
  if (result == j.end() || !result->is_object() || !GetInt(*result, "TTL", ttl_s)) {
    return Malformed("lease keep-alive", body);
  }
  return Status::OK();
}

Status ParseTxnSucceeded(std::string_view body, bool* succeeded) {
  json j;
  QR_RETURN_IF_ERROR(Parse(body, &j));
  auto it = j.find("succeeded");
  if (it != j.end() && !it->is_boolean()) return Malformed("transaction response", body);
  *succeeded = it != j.end() && it->get<bool>();
  return Status::OK();
}

Status ParseRange(std::string_view body, std::vector<KeyValue>* kvs, int64_t* revision) {
  json j;
  QR_RETURN_IF_ERROR(Parse(body, &j));
  kvs->clear();
  *revision = HeaderRevision(j);
  auto it = j.find("kvs");
  if (it == j.end()) return Status::OK();
  if (!it->is_array()) return Malformed("range response", body);
  for (const json& e : *it) {
    KeyValue kv;
    if (!ParseKeyValue(e, &kv)) return Malformed("range response", body);
    kvs->push_back(std::move(kv));
  }
  return Status::OK();
}

Status ParseWatchMessage(std::string_view body, std::vector<WatchEvent>* events,
                         int64_t* revision) {
  json j;
  QR_RETURN_IF_ERROR(Parse(body, &j));
  events->clear();
  auto result = j.find("result");
  if (result == j.end() || !result->is_object()) return Malformed("watch message", body);
  *revision = HeaderRevision(*result);
  auto canceled = result->find("canceled");
  if (canceled != result->end() && canceled->is_boolean() && canceled->get<bool>()) {
    std::string reason = result->value("cancel_reason", std::string("no reason given"));
    return Status(StatusCode::kUnavailable, "etcd canceled the watch: " + reason);
  }
  auto it = result->find("events");
  if (it == result->end()) return Status::OK();
  if (!it->is_array()) return Malformed("watch message", body);
  for (const json& e : *it) {
    WatchEvent event;
    if (!e.is_object()) return Malformed("watch event", body);
    event.is_delete = e.value("type", std::string()) == "DELETE";
    auto kv = e.find("kv");
    if (kv == e.end() || !ParseKeyValue(*kv, &event.kv)) return Malformed("watch event", body);
    events->push_back(std::move(event));
  }
  return Status::OK();
}

}  // namespace qr::etcd
