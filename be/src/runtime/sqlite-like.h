#pragma once

#include <sqlite3.h>

#include <string_view>

#include "util/status.h"

/// LIKE and GLOB in time linear in the value, whatever the pattern.
///
/// SQLite's built-in patternCompare() backtracks: a '%'-led pattern costs O(value length x
/// pattern length) inside one call, ~1-2 s for a 64-byte pattern on a 16 MiB value, and one
/// call cannot be interrupted. These replacements compile the pattern (at most 127 items:
/// the pattern length limit is 64 bytes, see sqlite-functions.h) into a bit-parallel
/// automaton (shift-and, with '%'/'*' as self-loops): one pass over the value, a few word
/// operations per character, ~25 ms at 16 MiB for any pattern. They answer exactly what
/// SQLite 3.40's like(P,X), like(P,X,E) and glob(P,X) answer: values read as text up to the
/// first NUL, characters decoded as sqlite3Utf8Read() decodes them (malformed sequences
/// included), ASCII-only case folding for LIKE, ESCAPE (also when it is '%' or '_'),
/// GLOB classes ("[^]a-c-]"), a trailing escape or an unterminated class never matching,
/// the same errors ("LIKE or GLOB pattern too complex", "ESCAPE expression must be a single
/// character"), NULL handling and, when the library was built with it (Debian's is),
/// SQLITE_LIKE_DOESNT_MATCH_BLOBS. Cost: an application-defined like() disables SQLite's LIKE
/// index optimization (a 'prefix%' pattern on an indexed column scans instead of seeking).
/// Thread-safety: registration configures one connection; call it before the connection is
/// shared.

namespace qr {

/// Overrides like/2, like/3 and glob/2 on 'db'.
Status RegisterLinearTimeLikeGlob(sqlite3* db);

/// The matcher itself, for tests and benchmarks: whether 'text' matches 'pattern' the way
/// SQLite's LIKE (with 'escape', 0 for none) or GLOB ('glob') does. Both are read up to their
/// first NUL. A pattern of more than 127 items never matches (and 'too_complex' is set).
bool LikeGlobMatch(std::string_view pattern, std::string_view text, bool glob, uint32_t escape,
                   bool* too_complex = nullptr);

}  // namespace qr
