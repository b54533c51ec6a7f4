#pragma once

#include <string>
#include <string_view>

namespace qr {

/// coordinatord's --help, --helpshort and --version, answered before gflags' own (which list
/// flags by file and put glog's first). Call after gflags::ParseCommandLineNonHelpFlags() and
/// before gflags::HandleCommandLineHelpFlags(), which keeps --helpfull, --helpxml, --helpon
/// and --helpmatch.
/// Thread-safety: call from main() before any thread starts (reads the flag registry).

/// Prints what --help, --helpshort or --version asks for to stdout and returns true when one
/// of them is set (the caller exits 0); false otherwise. 'version' is e.g. "0.2.0 (git
/// 1a2b3c4)".
bool HandleHelpAndVersionFlags(std::string_view version);

/// The --helpshort text: every flag of coordinatord (those defined under be/src, and the
/// logging and configuration flags of glog and gflags it documents) in titled groups, each
/// with its default, its unit and its description. A flag of ours missing from the group
/// table is listed under "Ungrouped" (ctest coordinatord.flags fails on it).
std::string FlagGroupsHelp();

}  // namespace qr
