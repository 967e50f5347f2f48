// The precompiled header of the libraries built on Halide
// (halide_pch.cmake) is built with this empty file.
