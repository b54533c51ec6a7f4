#include "runtime/sqlite-guarded-functions.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace qr {

namespace {

constexpr int kFunctionFlags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS;

int64_t Magnitude(int64_t v) { return v < 0 ? (v == INT64_MIN ? INT64_MAX : -v) : v; }

void PrintfFunction(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
  auto* self = static_cast<GuardedBuiltins*>(sqlite3_user_data(ctx));
  if (argc >= 1) {
    const auto* format = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
    if (format != nullptr &&
        LargestPrintfWidth(format, argc - 1, argv + 1) > self->max_length()) {
      sqlite3_result_null(ctx);  // what the built-in answers for a result past the limit
      return;
    }
  }
  self->CallBuiltin(ctx, "printf", argc, argv);
}

void JsonPatchFunction(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
  auto* self = static_cast<GuardedBuiltins*>(sqlite3_user_data(ctx));
  const int64_t work = static_cast<int64_t>(sqlite3_value_bytes(argv[0])) *
                       static_cast<int64_t>(sqlite3_value_bytes(argv[1]));
  if (work > kJsonPatchMaxWork) {
    sqlite3_result_error(
        ctx,
        "json_patch() refused: its cost grows with the product of its arguments' sizes, and "
        "the product of theirs exceeds 4 GiB (e.g. two objects of 64 KiB each are accepted)",
        -1);
    return;
  }
  self->CallBuiltin(ctx, "json_patch", argc, argv);
}

}  // namespace

int64_t LargestPrintfWidth(const char* f, int argc, sqlite3_value** argv) {
  int64_t largest = 0;
  int next_arg = 0;
  auto star = [&]() {
    const int64_t v = next_arg < argc ? sqlite3_value_int64(argv[next_arg]) : 0;
    ++next_arg;
    largest = std::max(largest, Magnitude(v));
  };
  auto digits = [&]() {
    int64_t v = 0;
    while (*f >= '0' && *f <= '9') {
      v = std::min<int64_t>(v * 10 + (*f - '0'), INT64_MAX / 100);
      ++f;
    }
    largest = std::max(largest, v);
  };
  while ((f = std::strchr(f, '%')) != nullptr) {
    ++f;
    if (*f == '%') {
      ++f;
      continue;
    }
    while (*f != '\0' && std::strchr("-+ #0,!", *f) != nullptr) ++f;  // flags
    if (*f == '*') {
      ++f;
      star();
    } else {
      digits();
    }
    if (*f == '.') {
      ++f;
      if (*f == '*') {
        ++f;
        star();
      } else {
        digits();
      }
    }
    while (*f == 'l') ++f;
    if (*f == '\0') break;
    ++f;        // the conversion
    ++next_arg; // takes one argument (an unknown conversion ends SQLite's output: harmless)
  }
  return largest;
}

Status GuardedBuiltins::Register(sqlite3* db, std::unique_ptr<GuardedBuiltins>* out) {
  sqlite3* builtins = nullptr;
  if (sqlite3_open_v2(":memory:", &builtins, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    sqlite3_close_v2(builtins);
    return Internal("cannot open the connection of the guarded SQL functions");
  }
  std::unique_ptr<GuardedBuiltins> self(new GuardedBuiltins(db, builtins));
  sqlite3_limit(builtins, SQLITE_LIMIT_LENGTH, sqlite3_limit(db, SQLITE_LIMIT_LENGTH, -1));
  for (const char* name : {"printf", "format"}) {
    if (sqlite3_create_function_v2(db, name, -1, kFunctionFlags, self.get(), &PrintfFunction,
                                   nullptr, nullptr, nullptr) != SQLITE_OK) {
      return Internal(std::string("cannot register ") + name + "(): " + sqlite3_errmsg(db));
    }
  }
  if (sqlite3_create_function_v2(db, "json_patch", 2, kFunctionFlags, self.get(),
                                 &JsonPatchFunction, nullptr, nullptr, nullptr) != SQLITE_OK) {
    return Internal(std::string("cannot register json_patch(): ") + sqlite3_errmsg(db));
  }
  *out = std::move(self);
  return Status::OK();
}

GuardedBuiltins::~GuardedBuiltins() {
  for (auto& [key, stmt] : statements_) sqlite3_finalize(stmt);
  sqlite3_close_v2(builtins_);
}

void GuardedBuiltins::CallBuiltin(sqlite3_context* ctx, const char* name, int argc,
                                  sqlite3_value** argv) {
  sqlite3_stmt*& stmt = statements_[{name, argc}];
  if (stmt == nullptr) {
    std::string sql = std::string("SELECT ") + name + "(";
    for (int i = 1; i <= argc; ++i) sql += (i > 1 ? ",?" : "?") + std::to_string(i);
    sql += ")";
    if (sqlite3_prepare_v2(builtins_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
      sqlite3_result_error(ctx, sqlite3_errmsg(builtins_), -1);
      stmt = nullptr;
      return;
    }
  }
  for (int i = 0; i < argc; ++i) sqlite3_bind_value(stmt, i + 1, argv[i]);
  const int rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) {
    sqlite3_result_value(ctx, sqlite3_column_value(stmt, 0));
  } else if (rc == SQLITE_TOOBIG || sqlite3_errcode(builtins_) == SQLITE_TOOBIG) {
    sqlite3_result_error_toobig(ctx);
  } else if (rc == SQLITE_NOMEM) {
    sqlite3_result_error_nomem(ctx);
  } else {
    sqlite3_result_error(ctx, sqlite3_errmsg(builtins_), -1);
  }
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
}

}  // namespace qr
