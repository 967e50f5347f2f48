// Result<T>: a value or the user errors that prevented it. The front end
// reports every problem it finds in one go, so the error side is a list.
#pragma once

#include <cassert>
#include <utility>
#include <variant>
#include <vector>

#include "ropegen/diagnostics.h"

namespace ropegen {

template <typename T>
class [[nodiscard]] Result {
 public:
  // By reference, not by value: a large T (a prepared call, ~2 KB) is moved
  // once into the result rather than twice.
  Result(const T& value) : v_(value) {}
  Result(T&& value) : v_(std::move(value)) {}
  Result(Diagnostic d) : v_(std::vector<Diagnostic>{std::move(d)}) {}
  Result(std::vector<Diagnostic> ds) : v_(std::move(ds)) { assert(!errors().empty()); }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  const T& value() const& { assert(ok()); return std::get<T>(v_); }
  T& value() & { assert(ok()); return std::get<T>(v_); }
  T&& value() && { assert(ok()); return std::get<T>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  const T* operator->() const { return &value(); }

  const std::vector<Diagnostic>& errors() const { return std::get<std::vector<Diagnostic>>(v_); }

 private:
  std::variant<T, std::vector<Diagnostic>> v_;
};

// Success, or the errors that prevented it (a Result without a value).
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Diagnostic d) : errors_{std::move(d)} {}
  Status(std::vector<Diagnostic> ds) : errors_(std::move(ds)) { assert(!errors_.empty()); }

  bool ok() const { return errors_.empty(); }
  explicit operator bool() const { return ok(); }
  const std::vector<Diagnostic>& errors() const { return errors_; }

 private:
  std::vector<Diagnostic> errors_;
};

}  // namespace ropegen
