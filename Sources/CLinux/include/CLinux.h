#ifndef CLINUX_H
#define CLINUX_H
// Linux-only declarations that `import Glibc` does not expose to Swift.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/sendfile.h>
#include <sys/timerfd.h>
#include <sys/vfs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

int accept4(int sockfd, struct sockaddr *addr, socklen_t *addrlen, int flags);

/// Installs one handler for `signals` that writes each signal's number (one byte) to a pipe, and
/// returns the pipe's read end (-1 on failure, or when called twice). Handlers are in place when it
/// returns, so no signal is lost or fatal from then on.
int clinux_catch_signals(const int *signals, int count);
/// 1 when `signo` is ignored now (e.g. SIGHUP under `nohup`, inherited from the parent).
int clinux_signal_ignored(int signo);

/// The calling thread's kernel id (gettid(2)), which glibc's headers hide without _GNU_SOURCE.
int clinux_gettid(void);

/// copy_file_range(2) (hidden without _GNU_SOURCE): copies `length` bytes from `in` at `*in_offset`
/// to `out` at `*out_offset` in the kernel, advancing both offsets; -1 with errno on failure.
long clinux_copy_file_range(int in, long long *in_offset, int out, long long *out_offset, unsigned long length);

/// O_DIRECT (hidden without _GNU_SOURCE; its value differs between architectures).
int clinux_o_direct(void);

#endif
