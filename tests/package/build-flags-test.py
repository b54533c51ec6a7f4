#!/usr/bin/env python3
"""Every translation unit of the project gets the project's build flags (ctest build-flags).

The registry library no longer passes qr_build_flags on to whoever links it, so each project
target links it itself; this checks, from compile_commands.json, that none was forgotten: each
source under be/src and tests is compiled with the warnings, with -fsanitize=QR_SANITIZE in a
sanitizer build and with -Wthread-safety in the clang-tsa build.
Usage: build-flags-test.py BINARY_DIR SOURCE_DIR QR_SANITIZE QR_THREAD_SAFETY
"""
import json
import os
import sys


def main() -> int:
    binary_dir, source_dir, sanitize, thread_safety = sys.argv[1:5]
    with open(os.path.join(binary_dir, "compile_commands.json")) as f:
        entries = json.load(f)
    required = ["-Wall", "-Wextra"]
    if sanitize:
        required.append("-fsanitize=" + sanitize)
    if thread_safety.upper() in ("ON", "1", "TRUE", "YES"):
        required.append("-Wthread-safety")
    roots = [os.path.join(source_dir, d) + os.sep for d in ("be", "tests")]
    checked = 0
    missing = []
    for entry in entries:
        path = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
        if not any(path.startswith(root) for root in roots):
            continue
        checked += 1
        args = entry["arguments"] if "arguments" in entry else entry["command"].split()
        absent = [flag for flag in required if flag not in args]
        if absent:
            missing.append(f"{os.path.relpath(path, source_dir)}: no {' '.join(absent)}")
    if checked == 0:
        print("no project source in compile_commands.json", file=sys.stderr)
        return 1
    for line in missing:
        print(line, file=sys.stderr)
    print(f"{checked} translation units checked for {' '.join(required)}: "
          f"{len(missing)} without")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
