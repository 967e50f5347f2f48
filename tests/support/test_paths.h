// Where the tests find this checkout's files and the rope-gen binary of this
// build. The absolute paths are compiled into test_paths.cpp alone: every
// other test file is the same wherever the checkout is, so its compile is
// memoized across checkouts (ccache, Makefile).
#pragma once

#include <string>

namespace ropegen::test {

// The checkout's root, absolute, without a trailing slash.
const std::string& source_dir();
// source_dir() + relative, where relative starts with '/': "/examples".
std::string source_path(const std::string& relative);
// This build's rope-gen executable, absolute.
const std::string& rope_gen_binary();

}  // namespace ropegen::test
