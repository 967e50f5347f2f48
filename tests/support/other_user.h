// Another user, for tests of what someone else on the machine can do: a
// throwaway system account, created when the tests run as root and removed
// afterwards. Elsewhere those tests skip, saying so.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <sys/types.h>

namespace ropegen::test {

struct OtherUser {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
};

// nullopt, with why in `why`, when not root or the account cannot be made.
std::optional<OtherUser> create_other_user(std::string* why);
void remove_other_user(const OtherUser& user);

// Runs `step` in a child process that is `user` (no supplementary groups):
// true if it returned true.
bool run_as(const OtherUser& user, const std::function<bool()>& step);

}  // namespace ropegen::test
