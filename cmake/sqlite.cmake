# SQLite::SQLite3: the SQLite coordinatord links, built from Debian 12's source of the library
# (3.40.1-2+deb12u2, every Debian patch and security fix) plus the project's patches in
# third_party/sqlite/ (docs/architecture.md, "The interrupt before every opcode").
# scripts/fetch-sqlite.sh makes the amalgamation; it runs here, at configure time, and is a
# no-op when its output is current. Compiled with the options of Debian's build (debian/rules
# and its configure call: `PRAGMA compile_options` lists the same set, which runtime-test's
# SqliteBuildTest checks), optimized and without sanitizer instrumentation in every preset, as
# the shared library it replaces was.
set(QR_THIRD_PARTY_DIR "${PROJECT_SOURCE_DIR}/build/third_party" CACHE PATH
    "Where scripts/fetch-sqlite.sh (and fetch-boost-headers.sh) put what they fetch")
set(_qr_sqlite_dir "${QR_THIRD_PARTY_DIR}/sqlite-3.40.1-2+deb12u2")
file(GLOB _qr_sqlite_patches CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/third_party/sqlite/*.patch")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${_qr_sqlite_patches} "${PROJECT_SOURCE_DIR}/scripts/fetch-sqlite.sh")
execute_process(COMMAND "${PROJECT_SOURCE_DIR}/scripts/fetch-sqlite.sh" "${QR_THIRD_PARTY_DIR}"
                RESULT_VARIABLE _qr_sqlite_rc)
if(NOT _qr_sqlite_rc EQUAL 0 OR NOT EXISTS "${_qr_sqlite_dir}/sqlite3.c")
  message(FATAL_ERROR "scripts/fetch-sqlite.sh failed (${_qr_sqlite_rc}): it downloads Debian's "
                      "sqlite3 source from deb.debian.org and needs curl, xz, patch, make and "
                      "tclsh (scripts/install-deps.sh installs them)")
endif()

add_library(qr_sqlite3 STATIC "${_qr_sqlite_dir}/sqlite3.c")
target_include_directories(qr_sqlite3 SYSTEM BEFORE PUBLIC "${_qr_sqlite_dir}")
target_compile_definitions(qr_sqlite3 PRIVATE
  _HAVE_SQLITE_CONFIG_H SQLITE_OS_UNIX=1 NDEBUG
  # configure: --enable-threadsafe --enable-fts4 --enable-fts5 --enable-json (math is default)
  SQLITE_THREADSAFE=1 SQLITE_ENABLE_MATH_FUNCTIONS SQLITE_ENABLE_FTS4 SQLITE_ENABLE_FTS5
  # debian/rules
  SQLITE_SECURE_DELETE SQLITE_ENABLE_COLUMN_METADATA SQLITE_ENABLE_FTS3
  SQLITE_ENABLE_FTS3_PARENTHESIS SQLITE_ENABLE_RTREE=1 SQLITE_SOUNDEX=1
  SQLITE_ENABLE_UNLOCK_NOTIFY SQLITE_OMIT_LOOKASIDE=1 SQLITE_ENABLE_DBSTAT_VTAB
  SQLITE_ALLOW_ROWID_IN_VIEW SQLITE_ENABLE_UPDATE_DELETE_LIMIT=1 SQLITE_ENABLE_LOAD_EXTENSION
  SQLITE_ENABLE_JSON1 SQLITE_LIKE_DOESNT_MATCH_BLOBS SQLITE_ENABLE_FTS3_TOKENIZER=1
  SQLITE_USE_URI=1 SQLITE_MAX_SCHEMA_RETRY=25 SQLITE_ENABLE_PREUPDATE_HOOK SQLITE_ENABLE_SESSION
  SQLITE_ENABLE_STMTVTAB SQLITE_MAX_VARIABLE_NUMBER=250000)
# After the build type's flags, so -O2 also holds in the Debug presets (tsan, asan, fuzz).
target_compile_options(qr_sqlite3 PRIVATE -O2 -g0 -fno-strict-aliasing -w)
target_link_libraries(qr_sqlite3 PUBLIC Threads::Threads ${CMAKE_DL_LIBS} m)
set_target_properties(qr_sqlite3 PROPERTIES POSITION_INDEPENDENT_CODE ON)
add_library(SQLite::SQLite3 ALIAS qr_sqlite3)
