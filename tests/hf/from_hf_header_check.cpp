// include/ropegen/from_hf.h compiles with include/ alone on the include path
// (no Halide, no nlohmann, no source-tree header): built with nothing else.
#include "ropegen/from_hf.h"

ropegen::FromHfOptions ropegen_from_hf_header_check;
