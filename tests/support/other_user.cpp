#include "support/other_user.h"

#include <grp.h>
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/run_command.h"

namespace ropegen::test {

std::optional<OtherUser> create_other_user(std::string* why) {
  if (::geteuid() != 0) {
    *why = "not running as root: cannot create another user to act as the attacker";
    return std::nullopt;
  }
  OtherUser user;
  user.name = "rgtest" + std::to_string(::getpid());
  const CommandResult r =
      run_command("useradd --system --no-create-home --shell /usr/sbin/nologin --user-group " + user.name);
  const passwd* pw = r.exit_code == 0 ? ::getpwnam(user.name.c_str()) : nullptr;
  if (!pw) {
    *why = "useradd failed: " + r.err;
    return std::nullopt;
  }
  user.uid = pw->pw_uid;
  user.gid = pw->pw_gid;
  return user;
}

void remove_other_user(const OtherUser& user) { run_command("userdel " + user.name); }

bool run_as(const OtherUser& user, const std::function<bool()>& step) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const bool became = ::setgroups(0, nullptr) == 0 && ::setgid(user.gid) == 0 && ::setuid(user.uid) == 0;
    ::_exit(became && step() ? 0 : 1);
  }
  int status = 0;
  return pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace ropegen::test
