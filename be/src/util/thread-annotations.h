#pragma once

/// Clang thread-safety analysis attributes (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html).
/// They compile to nothing elsewhere; the clang-tsa preset turns violations into errors.
/// Every name is prefixed QR_ so that a consumer's own annotation macros (or Abseil's legacy
/// unprefixed ones) never collide with ours, whatever the include order.

#if defined(__clang__)
#define QR_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define QR_THREAD_ANNOTATION(x)
#endif

#define QR_CAPABILITY(x) QR_THREAD_ANNOTATION(capability(x))
#define QR_SCOPED_CAPABILITY QR_THREAD_ANNOTATION(scoped_lockable)
#define QR_GUARDED_BY(x) QR_THREAD_ANNOTATION(guarded_by(x))
#define QR_PT_GUARDED_BY(x) QR_THREAD_ANNOTATION(pt_guarded_by(x))
#define QR_ACQUIRED_BEFORE(...) QR_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define QR_ACQUIRED_AFTER(...) QR_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define QR_REQUIRES(...) QR_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define QR_REQUIRES_SHARED(...) QR_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define QR_ACQUIRE(...) QR_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define QR_ACQUIRE_SHARED(...) QR_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define QR_RELEASE(...) QR_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define QR_RELEASE_SHARED(...) QR_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define QR_RELEASE_GENERIC(...) QR_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define QR_TRY_ACQUIRE(...) QR_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define QR_TRY_ACQUIRE_SHARED(...) \
  QR_THREAD_ANNOTATION(try_acquire_shared_capability(__VA_ARGS__))
#define QR_EXCLUDES(...) QR_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define QR_ASSERT_CAPABILITY(x) QR_THREAD_ANNOTATION(assert_capability(x))
#define QR_RETURN_CAPABILITY(x) QR_THREAD_ANNOTATION(lock_returned(x))
#define QR_NO_THREAD_SAFETY_ANALYSIS QR_THREAD_ANNOTATION(no_thread_safety_analysis)
