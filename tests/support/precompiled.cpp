// The test programs' precompiled header (tests/CMakeLists.txt) is built with
// this empty file; every test file is then compiled from it.
