#pragma once

/// Clang thread-safety analysis attributes (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html).
/// They compile to nothing elsewhere; the clang-tsa preset turns violations into errors.

#if defined(__clang__)
#define QR_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define QR_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) QR_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY QR_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) QR_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) QR_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) QR_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) QR_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define REQUIRES(...) QR_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) QR_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE(...) QR_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) QR_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) QR_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) QR_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) QR_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) QR_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) QR_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) QR_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) QR_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS QR_THREAD_ANNOTATION(no_thread_safety_analysis)
