#include "runtime/sqlite-guarded-functions.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "runtime/step-checkpoint.h"

namespace qr {

namespace {

constexpr int kFunctionFlags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS;
/// The subtype SQLite's json_* functions give their JSON results (JSON_SUBTYPE in json.c).
constexpr unsigned int kJsonSubtype = 'J';

/// SQLite 3.40's scalar JSON functions and operators, with the argument counts they are
/// registered with (-1: any), so that a wrong count is still refused at prepare time, by
/// SQLite, with its own message. json_patch is registered with its guard below.
constexpr std::pair<const char*, int> kCheckedJsonFunctions[] = {
    {"json", 1},           {"json_array", -1},   {"json_array_length", 1},
    {"json_array_length", 2}, {"json_extract", -1}, {"->", 2},
    {"->>", 2},            {"json_insert", -1},  {"json_object", -1},
    {"json_quote", 1},     {"json_remove", -1},  {"json_replace", -1},
    {"json_set", -1},      {"json_type", 1},     {"json_type", 2},
    {"json_valid", 1},
};

void PrintfFunction(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
  auto* self = static_cast<GuardedBuiltins*>(sqlite3_user_data(ctx));
  const auto* format =
      argc >= 1 ? reinterpret_cast<const char*>(sqlite3_value_text(argv[0])) : nullptr;
  if (format != nullptr) {
    if (MinimumPrintfLength(format, argc - 1, argv + 1) > self->max_length()) {
      sqlite3_result_null(ctx);  // what the built-in answers for a result past the limit
      return;
    }
    std::vector<PrintfPiece> pieces;
    if (PlanPrintfRepeats(format, argc - 1, argv + 1, self->printf_repeat_threshold(),
                          &pieces)) {
      self->RenderPlanned(ctx, format, argc - 1, argv + 1, pieces);
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
  self->CallChecked(ctx, "json_patch", argc, argv);
}

/// Binds 'value' to parameter 'i' of 'stmt' without copying a string or BLOB: 'value' outlives
/// the statement's use, which is reset before the calling function returns.
void BindArgument(sqlite3_stmt* stmt, int i, sqlite3_value* value) {
  switch (sqlite3_value_type(value)) {
    case SQLITE_TEXT: {
      const unsigned char* text = sqlite3_value_text(value);
      sqlite3_bind_text64(stmt, i, reinterpret_cast<const char*>(text),
                          static_cast<sqlite3_uint64>(sqlite3_value_bytes(value)),
                          SQLITE_STATIC, SQLITE_UTF8);
      break;
    }
    case SQLITE_BLOB:
      sqlite3_bind_blob64(stmt, i, sqlite3_value_blob(value),
                          static_cast<sqlite3_uint64>(sqlite3_value_bytes(value)),
                          SQLITE_STATIC);
      break;
    default:
      sqlite3_bind_value(stmt, i, value);
  }
}

void CheckedFunction(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
  const auto* checked = static_cast<const GuardedBuiltins::Checked*>(sqlite3_user_data(ctx));
  checked->self->CallChecked(ctx, checked->name, argc, argv);
}

}  // namespace

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
  if (sqlite3_create_function_v2(db, "json_patch", 2, kFunctionFlags | SQLITE_SUBTYPE,
                                 self.get(), &JsonPatchFunction, nullptr, nullptr,
                                 nullptr) != SQLITE_OK) {
    return Internal(std::string("cannot register json_patch(): ") + sqlite3_errmsg(db));
  }
  for (const auto& [name, num_args] : kCheckedJsonFunctions) {
    QR_RETURN_IF_ERROR(self->RegisterChecked(name, num_args));
  }
  *out = std::move(self);
  return Status::OK();
}

GuardedBuiltins::~GuardedBuiltins() {
  for (auto& [key, stmt] : statements_) sqlite3_finalize(stmt);
  sqlite3_close_v2(builtins_);
}

Status GuardedBuiltins::RegisterChecked(const char* name, int num_args) {
  checked_.push_back(std::make_unique<Checked>(Checked{this, name}));
  if (sqlite3_create_function_v2(served_, name, num_args, kFunctionFlags | SQLITE_SUBTYPE,
                                 checked_.back().get(), &CheckedFunction, nullptr, nullptr,
                                 nullptr) != SQLITE_OK) {
    return Internal(std::string("cannot register ") + name + "(): " + sqlite3_errmsg(served_));
  }
  return Status::OK();
}

sqlite3_stmt* GuardedBuiltins::Statement(sqlite3_context* ctx, const char* name, int argc,
                                         const std::string& json_args) {
  std::tuple<std::string, int, std::string> key{name, argc, json_args};
  if (statements_.size() >= kMaxCachedStatements && !statements_.contains(key)) {
    // None of them is being stepped: each call steps and resets its statement before the
    // next one is looked up (the built-ins run on a connection without checked functions).
    for (auto& [unused, cached] : statements_) sqlite3_finalize(cached);
    statements_.clear();
  }
  sqlite3_stmt*& stmt = statements_[std::move(key)];
  if (stmt == nullptr) {
    auto arg = [&json_args](int i) {
      const std::string p = "?" + std::to_string(i);
      return static_cast<size_t>(i) <= json_args.size() && json_args[i - 1] == '1'
                 ? "json(" + p + ")"
                 : p;
    };
    std::string sql = "SELECT ";
    if (name[0] == '-') {  // the -> and ->> operators
      sql += arg(1) + " " + name + " " + arg(2);
    } else {
      sql += std::string(name) + "(";
      for (int i = 1; i <= argc; ++i) sql += (i > 1 ? "," : "") + arg(i);
      sql += ")";
    }
    if (sqlite3_prepare_v2(builtins_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
      sqlite3_result_error(ctx, sqlite3_errmsg(builtins_), -1);
      stmt = nullptr;
    }
  }
  return stmt;
}

void GuardedBuiltins::SetStepError(sqlite3_context* ctx, int rc) {
  if (rc == SQLITE_TOOBIG || sqlite3_errcode(builtins_) == SQLITE_TOOBIG) {
    sqlite3_result_error_toobig(ctx);
  } else if (rc == SQLITE_NOMEM) {
    sqlite3_result_error_nomem(ctx);
  } else {
    sqlite3_result_error(ctx, sqlite3_errmsg(builtins_), -1);
  }
}

void GuardedBuiltins::CallChecked(sqlite3_context* ctx, const char* name, int argc,
                                  sqlite3_value** argv) {
  size_t bytes = 0;
  std::string json_args;
  for (int i = 0; i < argc; ++i) {
    const int type = sqlite3_value_type(argv[i]);
    if (type == SQLITE_TEXT || type == SQLITE_BLOB) {
      bytes += static_cast<size_t>(sqlite3_value_bytes(argv[i]));
    }
    if (sqlite3_value_subtype(argv[i]) == kJsonSubtype) {
      json_args.resize(static_cast<size_t>(argc), '0');
      json_args[static_cast<size_t>(i)] = '1';
    }
  }
  if (StepCheckpoint::Charge(bytes)) {
    sqlite3_result_error_code(ctx, SQLITE_INTERRUPT);
    return;
  }
  CallBuiltin(ctx, name, argc, argv, json_args);
}

void GuardedBuiltins::CallBuiltin(sqlite3_context* ctx, const char* name, int argc,
                                  sqlite3_value** argv, const std::string& json_args) {
  sqlite3_stmt* stmt = Statement(ctx, name, argc, json_args);
  if (stmt == nullptr) return;
  for (int i = 0; i < argc; ++i) BindArgument(stmt, i + 1, argv[i]);
  const int rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) {
    sqlite3_result_value(ctx, sqlite3_column_value(stmt, 0));
  } else {
    SetStepError(ctx, rc);
  }
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
}

int GuardedBuiltins::RunPrintf(sqlite3_context* ctx, std::string_view format, int argc,
                               sqlite3_value** argv, std::string* out) {
  sqlite3_stmt* stmt = Statement(ctx, "printf", argc + 1, std::string());
  if (stmt == nullptr) return -1;
  sqlite3_bind_text64(stmt, 1, format.data(), format.size(), SQLITE_STATIC, SQLITE_UTF8);
  for (int i = 0; i < argc; ++i) BindArgument(stmt, i + 2, argv[i]);
  const int rc = sqlite3_step(stmt);
  int answer = -1;
  if (rc == SQLITE_ROW) {
    const auto* text = static_cast<const char*>(sqlite3_column_blob(stmt, 0));
    answer = text != nullptr || sqlite3_column_type(stmt, 0) != SQLITE_NULL ? 1 : 0;
    if (answer == 1) out->assign(text != nullptr ? text : "", sqlite3_column_bytes(stmt, 0));
  } else {
    SetStepError(ctx, rc);
  }
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  return answer;
}

void GuardedBuiltins::RenderPlanned(sqlite3_context* ctx, const char* format, int argc,
                                    sqlite3_value** argv,
                                    const std::vector<PrintfPiece>& pieces) {
  ++planned_calls_;
  std::vector<std::string> rendered(pieces.size());
  int64_t total = 0;
  for (size_t k = 0; k < pieces.size(); ++k) {
    const PrintfPiece& piece = pieces[k];
    if (piece.repeat > 0) {
      total += piece.RepeatBytes();
      continue;
    }
    const int first = std::min(piece.first_arg, argc);
    const int end = std::min(piece.end_arg, argc);
    const std::string_view text(format + piece.format_begin,
                                piece.format_end - piece.format_begin);
    ++rendered_pieces_;
    const int answer = RunPrintf(ctx, text, end - first, argv + first, &rendered[k]);
    if (answer < 0) return;
    if (answer == 0) total = INT64_MAX / 2;  // a piece alone is too big: so is the whole
    total += static_cast<int64_t>(rendered[k].size());
    // The built-in's accumulator refuses a result of SQLITE_LIMIT_LENGTH bytes or more and
    // answers NULL for it. Checked after each piece: the rendered pieces are held outside
    // SQLite's heap, and 5,000 pieces of 2 MB each would otherwise be held before the check
    // (10 GB for one call).
    if (total >= max_length()) {
      sqlite3_result_null(ctx);
      return;
    }
  }
  if (total >= max_length()) {  // the repeat pieces alone
    sqlite3_result_null(ctx);
    return;
  }
  char* out = static_cast<char*>(sqlite3_malloc64(total + 1));
  if (out == nullptr) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  char* p = out;
  WorkCheckpoints checkpoints;
  for (size_t k = 0; k < pieces.size(); ++k) {
    if (pieces[k].repeat > 0) {
      if (!RenderRepeat(pieces[k], p, &checkpoints)) {
        sqlite3_free(out);
        sqlite3_result_error_code(ctx, SQLITE_INTERRUPT);
        return;
      }
      p += pieces[k].RepeatBytes();
    } else {
      std::memcpy(p, rendered[k].data(), rendered[k].size());
      p += rendered[k].size();
    }
  }
  *p = '\0';
  sqlite3_result_text64(ctx, out, total, sqlite3_free, SQLITE_UTF8);
}

}  // namespace qr
