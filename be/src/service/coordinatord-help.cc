// coordinatord's own --help and --helpshort: the daemon's flags grouped by what they configure,
// with defaults and units, instead of gflags' listing by source file with glog's 30 flags first.

#include "service/coordinatord-help.h"

#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <gflags/gflags.h>

namespace qr {
namespace {

struct FlagGroup {
  const char* title;
  std::vector<std::string_view> flags;
};

/// Every flag of coordinatord belongs to exactly one group (ctest coordinatord.flags checks
/// that each flag DEFINEd under be/src appears here). Library flags listed here are the ones an
/// operator needs; --helpfull shows the rest.
const std::vector<FlagGroup>& FlagGroups() {
  static const auto* groups = new std::vector<FlagGroup>{
      {"Network and HTTP",
       {"http_bind_address", "http_port", "num_http_threads", "http_idle_timeout_s",
        "max_connections", "max_connections_per_address", "max_statement_bytes",
        "max_header_bytes", "http_trust_forwarded_headers", "http_trusted_proxies",
        "http_allowed_hosts"}},
      {"Authentication, users and TLS",
       {"auth_password_file", "allow_insecure_auth", "tls_cert_file", "tls_key_file",
        "default_user", "admin_users", "auth_max_failures", "auth_failure_window_s",
        "auth_verify_threads", "auth_max_pending_verifications"}},
      {"Admission and query limits",
       {"max_running_queries", "max_queued_queries", "max_in_flight_queries",
        "max_in_flight_queries_per_user", "max_running_queries_per_user",
        "max_session_properties", "exec_time_limit_s", "idle_query_timeout_s",
        "abandoned_query_timeout_s", "max_page_retries",
        "max_failed_queries_per_user_per_s"}},
      {"Memory",
       {"max_result_memory_mb", "query_max_memory_mb", "sqlite_heap_limit_mb", "max_value_mb"}},
      {"Spill (temporary files)", {"spill_dir", "max_spill_mb", "query_max_spill_mb"}},
      {"Execution and database",
       {"database", "catalog_name", "data_dir", "sample_scale_factor", "num_query_threads",
        "long_query_after_ms", "long_query_nice", "long_query_policy", "long_query_yield_us",
        "max_long_queries_per_user", "scheduler_slice_us"}},
      {"Shutdown", {"shutdown_grace_period_s", "shutdown_client_idle_s", "shutdown_drain_s"}},
      {"Cluster (etcd)",
       {"etcd_endpoints", "cluster_name", "advertised_uri", "cluster_lease_ttl_s",
        "cluster_max_members", "etcd_request_timeout_ms", "cluster_forward_timeout_ms",
        "cluster_forward_pool_size", "cluster_view_timeout_ms", "cluster_secret_file",
        "cluster_ca_file", "cluster_client_cert_file", "cluster_client_key_file",
        "etcd_ca_file", "etcd_client_cert_file", "etcd_client_key_file"}},
      {"Debug pages and metrics",
       {"query_log_size", "query_stmt_size", "queries_max_limit", "queries_list_threads",
        "queries_list_max_pending", "query_plan_timeout_ms", "www_dir", "metrics_per_shard"}},
      {"Query history",
       {"query_history_dir", "query_history_sync", "query_history_sync_interval_ms",
        "query_history_segment_mb", "query_history_max_age_s", "query_history_max_segments",
        "query_history_max_mb", "query_history_queue_size"}},
      {"Registry", {"registry_num_shards"}},
      {"Logging (glog)",
       {"log_dir", "logtostderr", "alsologtostderr", "stderrthreshold", "minloglevel", "v",
        "max_log_size", "logbuflevel"}},
      {"Configuration and help (gflags)",
       {"flagfile", "version", "help", "helpshort", "helpfull"}},
  };
  return *groups;
}

/// gflags' help flags, described for this program (gflags' own texts say "main module"), and
/// shown without a value.
const std::map<std::string_view, std::string_view>& ActionFlags() {
  static const auto* flags = new std::map<std::string_view, std::string_view>{
      {"flagfile",
       "Read flags from this file, one --name=value per line (lines starting with # are "
       "comments); flags after it on the command line override the file's. The systemd unit "
       "reads /etc/coordinatord/coordinatord.flags."},
      {"version", "Print the version and the git revision, then exit."},
      {"help", "Print this list, then the names of the libraries' other flags, then exit."},
      {"helpshort", "Print this list, then exit."},
      {"helpfull", "Describe every flag, the libraries' included, by source file, then exit."},
  };
  return *flags;
}

/// What coordinatord does differently from a library flag's own description (see main()).
std::string_view DaemonNote(std::string_view name) {
  if (name == "logbuflevel") {
    return "coordinatord: -1 unless given, so that every line (the audit trail) is written "
           "when logged.";
  }
  if (name == "log_dir") return "coordinatord: empty logs to stderr (--logtostderr).";
  return "";
}

/// True for a flag defined in this project's sources (gflags records __FILE__).
bool IsOurs(const gflags::CommandLineFlagInfo& flag) {
  return flag.filename.find("be/src/") != std::string::npos;
}

/// The unit of a flag's value, from the suffix convention of STYLE.md (_s, _ms, _mb, _bytes).
std::string_view UnitOf(std::string_view name) {
  auto ends_with = [&](std::string_view suffix) { return name.ends_with(suffix); };
  if (ends_with("_ms")) return "milliseconds";
  if (ends_with("_per_s")) return "per second";
  if (ends_with("_s")) return "seconds";
  if (ends_with("_mb")) return "MiB";
  if (ends_with("_bytes")) return "bytes";
  if (name == "max_log_size") return "MiB";
  return "";
}

/// Appends 'text' wrapped at 100 columns, each line indented by six spaces.
void AppendWrapped(std::string_view text, std::string* out) {
  constexpr size_t kIndent = 6, kWidth = 100;
  size_t column = 0;
  while (!text.empty()) {
    size_t space = text.find(' ');
    std::string_view word = text.substr(0, space);
    text = space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
    if (column > 0 && column + 1 + word.size() > kWidth) {
      out->push_back('\n');
      column = 0;
    }
    if (column == 0) {
      out->append(kIndent, ' ');
      column = kIndent;
    } else {
      out->push_back(' ');
      ++column;
    }
    out->append(word);
    column += word.size();
  }
  out->push_back('\n');
}

void AppendFlag(const gflags::CommandLineFlagInfo& flag, std::string* out) {
  auto action = ActionFlags().find(flag.name);
  if (action != ActionFlags().end()) {
    *out += "  --" + flag.name + (flag.name == "flagfile" ? "=PATH\n" : "\n");
    AppendWrapped(action->second, out);
    return;
  }
  *out += "  --" + flag.name + "=";
  *out += flag.type == "string" && flag.default_value.empty() ? "\"\"" : flag.default_value;
  std::string_view unit = UnitOf(flag.name);
  if (!unit.empty()) *out += " (" + std::string(unit) + ")";
  *out += "\n";
  std::string_view note = DaemonNote(flag.name);
  AppendWrapped(note.empty() ? flag.description : flag.description + " " + std::string(note),
                out);
}

std::map<std::string, gflags::CommandLineFlagInfo, std::less<>> AllFlagsByName() {
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  std::map<std::string, gflags::CommandLineFlagInfo, std::less<>> by_name;
  for (auto& flag : all) by_name.emplace(flag.name, std::move(flag));
  return by_name;
}

/// The names of the flags --help mentions but does not describe: the libraries' others.
std::string OtherFlagNames() {
  auto flags = AllFlagsByName();
  for (const FlagGroup& group : FlagGroups()) {
    for (std::string_view name : group.flags) {
      if (auto it = flags.find(name); it != flags.end()) flags.erase(it);
    }
  }
  std::string line;
  std::string out;
  for (const auto& [name, flag] : flags) {
    if (IsOurs(flag)) continue;  // listed under "Ungrouped" already
    if (!line.empty() && line.size() + name.size() + 3 > 100) {
      out += line + "\n";
      line.clear();
    }
    line += " --" + name;
  }
  return out + line + "\n";
}

}  // namespace

std::string FlagGroupsHelp() {
  auto flags = AllFlagsByName();
  std::string out;
  for (const FlagGroup& group : FlagGroups()) {
    std::string section;
    for (std::string_view name : group.flags) {
      auto it = flags.find(name);
      if (it == flags.end()) continue;  // a library flag this build's glog lacks
      AppendFlag(it->second, &section);
      flags.erase(it);
    }
    if (!section.empty()) out += std::string(group.title) + ":\n" + section + "\n";
  }
  std::string ungrouped;
  for (const auto& [name, flag] : flags) {
    if (IsOurs(flag)) AppendFlag(flag, &ungrouped);
  }
  if (!ungrouped.empty()) {
    out += "Ungrouped (add them to FlagGroups() in be/src/service/coordinatord-help.cc):\n" +
           ungrouped + "\n";
  }
  return out;
}

bool HandleHelpAndVersionFlags(std::string_view version) {
  auto is_set = [](const char* name) {
    std::string value;
    return gflags::GetCommandLineOption(name, &value) && value == "true";
  };
  if (is_set("version")) {
    printf("coordinatord %.*s\n", static_cast<int>(version.size()), version.data());
    return true;
  }
  const bool help = is_set("help");
  if (!help && !is_set("helpshort")) return false;
  std::string out = std::string(gflags::ProgramUsage()) + "\n\n" +
                    "Flags are --name=value on the command line or one per line in a file read "
                    "with --flagfile=PATH.\n\n" +
                    FlagGroupsHelp();
  if (help) {
    out += "Other flags of the libraries (glog, gflags); --helpfull describes every flag:\n" +
           OtherFlagNames();
  } else {
    out += "--help also names the libraries' other flags; --helpfull describes them.\n";
  }
  fwrite(out.data(), 1, out.size(), stdout);
  return true;
}

}  // namespace qr
