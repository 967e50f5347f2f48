// The linker's build id of the code that compiles kernels (this library,
// linked into rope-gen or a test binary). The version number alone would
// let a rebuilt rope-gen with a changed schedule load kernels its previous
// build compiled; the build id changes with any change to the code.
#pragma once

#include <string>

namespace ropegen::runtime {

// Hex digits of the ELF NT_GNU_BUILD_ID note of the object this function
// is linked into; "none" where the linker wrote no build id.
const std::string& code_build_id();

}  // namespace ropegen::runtime
