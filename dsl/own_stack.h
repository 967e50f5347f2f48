// Runs a function on a thread of its own with a stack of a known size, for
// work whose recursion depth the input decides (yaml-cpp's parser), so it
// does not depend on the caller's stack (a 64 KiB thread overflowed).
#pragma once

#include <cstddef>
#include <functional>

namespace ropegen::dsl {

// Exceptions are rethrown in the caller. Without a thread to be had, the
// work runs on the caller's stack.
void run_with_stack(size_t stack_bytes, const std::function<void()>& work);

}  // namespace ropegen::dsl
