#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "check.h"

namespace qr {

/// Broad class of an error; the protocol layer maps these (plus a detail code) to HTTP and
/// Trino error codes.
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kPermissionDenied,
  kResourceExhausted,
  kCancelled,
  kTimedOut,
  kNotSupported,
  kUnavailable,
  kInternal,
};

const char* StatusCodeName(StatusCode code);

/// The result of an operation: OK, or an error code with a message.
/// OK is one pointer-sized word and costs no allocation; errors allocate their message.
/// Thread-safety: a Status is a value; distinct objects may be used from distinct threads.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message);
  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status OK() { return Status(); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  /// The message; empty for OK.
  const std::string& message() const;
  /// "CODE_NAME: message", or "OK".
  std::string ToString() const;

  bool operator==(const Status& other) const {
    return code() == other.code() && message() == other.message();
  }

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<State> state_;
};

inline Status InvalidArgument(std::string msg) {
  return Status(StatusCode::kInvalidArgument, std::move(msg));
}
inline Status NotFound(std::string msg) { return Status(StatusCode::kNotFound, std::move(msg)); }
inline Status AlreadyExists(std::string msg) {
  return Status(StatusCode::kAlreadyExists, std::move(msg));
}
inline Status Internal(std::string msg) { return Status(StatusCode::kInternal, std::move(msg)); }

/// Either a value of T or a non-OK Status. value() of an error, and a StatusOr made from an OK
/// status, abort with the reason (in every build: reading an absent value is never silent).
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    QR_CHECK(!status_.ok(), "StatusOr constructed from an OK status without a value");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  const T& value() const& {
    QR_CHECK(ok(), status_.ToString());
    return *value_;
  }
  T& value() & {
    QR_CHECK(ok(), status_.ToString());
    return *value_;
  }
  T&& value() && {
    QR_CHECK(ok(), status_.ToString());
    return std::move(*value_);
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

/// Truncates untrusted input for quoting in an error message: at most 'max_len' bytes, with
/// "...(N bytes)" appended when cut, and non-printable bytes escaped as \xNN.
std::string QuoteForError(std::string_view input, size_t max_len = 64);

}  // namespace qr

#define QR_STATUS_CONCAT_INNER(a, b) a##b
#define QR_STATUS_CONCAT(a, b) QR_STATUS_CONCAT_INNER(a, b)

/// Returns the status from the current function if it is not OK.
#define QR_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::qr::Status _qr_status = (expr);        \
    if (!_qr_status.ok()) return _qr_status; \
  } while (0)
