// libropegen has no code of its own: it is rope-gen's internal libraries
// linked whole (CMakeLists.txt), and CMake wants a source for every library.
