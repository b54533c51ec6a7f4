#pragma once

/// Clang thread-safety analysis attributes (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html).
/// They compile to nothing elsewhere; the clang-tsa preset turns violations into errors.
///
/// Abseil 20220623's legacy absl/base/internal/thread_annotations.h (reached through
/// absl/container/flat_hash_map.h, which the registry uses) defines the same unprefixed names
/// with the same meaning. Each macro is #undef'd first so that including Abseil before this
/// header is not a redefinition; including it after is silent (a system header).

#if defined(__clang__)
#define QR_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define QR_THREAD_ANNOTATION(x)
#endif

#undef CAPABILITY
#define CAPABILITY(x) QR_THREAD_ANNOTATION(capability(x))
#undef SCOPED_CAPABILITY
#define SCOPED_CAPABILITY QR_THREAD_ANNOTATION(scoped_lockable)
#undef GUARDED_BY
#define GUARDED_BY(x) QR_THREAD_ANNOTATION(guarded_by(x))
#undef PT_GUARDED_BY
#define PT_GUARDED_BY(x) QR_THREAD_ANNOTATION(pt_guarded_by(x))
#undef ACQUIRED_BEFORE
#define ACQUIRED_BEFORE(...) QR_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#undef ACQUIRED_AFTER
#define ACQUIRED_AFTER(...) QR_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#undef REQUIRES
#define REQUIRES(...) QR_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#undef REQUIRES_SHARED
#define REQUIRES_SHARED(...) QR_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#undef ACQUIRE
#define ACQUIRE(...) QR_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#undef ACQUIRE_SHARED
#define ACQUIRE_SHARED(...) QR_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#undef RELEASE
#define RELEASE(...) QR_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#undef RELEASE_SHARED
#define RELEASE_SHARED(...) QR_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#undef RELEASE_GENERIC
#define RELEASE_GENERIC(...) QR_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#undef TRY_ACQUIRE
#define TRY_ACQUIRE(...) QR_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#undef EXCLUDES
#define EXCLUDES(...) QR_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#undef ASSERT_CAPABILITY
#define ASSERT_CAPABILITY(x) QR_THREAD_ANNOTATION(assert_capability(x))
#undef RETURN_CAPABILITY
#define RETURN_CAPABILITY(x) QR_THREAD_ANNOTATION(lock_returned(x))
#undef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS QR_THREAD_ANNOTATION(no_thread_safety_analysis)
