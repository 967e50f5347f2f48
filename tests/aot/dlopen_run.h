/* rope_driver.c's RUN_FN through a shared object built from a library's
 * archive (its <name>_run the one symbol it exports), loaded with dlopen
 * as a program that loads many such libraries would:
 *   -DROPE_HEADER='"dlopen_run.h"' -DRUN_FN=dlopen_run
 *   -DSHARED_OBJECT='"path/lib.so"' -DRUN_SYMBOL='"name_run"'
 * Needs only ropegen_c.h (the types) from the library's directory. */
#ifndef ROPEGEN_TESTS_AOT_DLOPEN_RUN_H
#define ROPEGEN_TESTS_AOT_DLOPEN_RUN_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "ropegen_c.h"

/* The shared object exports nothing but RUN_SYMBOL: the driver's status
 * names come from here. */
static const char *dlopen_status_string(int status) { return status == 0 ? "ok" : "failed"; }
#define ropegen_status_string dlopen_status_string

typedef int (*run_function)(const ropegen_call *, ropegen_message *);

static int dlopen_run(const ropegen_call *call, ropegen_message *message) {
  static run_function run;
  if (!run) {
    void *so = dlopen(SHARED_OBJECT, RTLD_NOW | RTLD_LOCAL);
    if (!so) {
      fprintf(stderr, "dlopen: %s\n", dlerror());
      exit(106);
    }
    *(void **)&run = dlsym(so, RUN_SYMBOL); /* POSIX's way past ISO C's object/function pointer split */
    if (!run) {
      fprintf(stderr, "dlsym %s: %s\n", RUN_SYMBOL, dlerror());
      exit(107);
    }
  }
  return run(call, message);
}

#endif
