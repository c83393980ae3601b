// Preloaded into a server run under Valgrind (bench/callgrind_relay.sh, bench/cluster_cost_split.py):
// Valgrind 3.19 writes into the signal mask a program passes to sigsuspend, and libdispatch's
// main-thread wait passes one in read-only memory, so Valgrind dies of a SIGSEGV. This sigsuspend
// passes a copy; the server itself is unchanged.
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
int sigsuspend(const sigset_t *mask) {
  sigset_t copy = *mask;
  return (int)syscall(SYS_rt_sigsuspend, &copy, (size_t)8);
}
