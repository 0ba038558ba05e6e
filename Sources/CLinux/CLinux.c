// CLinux mostly re-exports system headers (see include/CLinux.h); what needs C is below.
#define _GNU_SOURCE  // pipe2
#include "CLinux.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

// The write end of the pipe the signal handler reports to. A signal handler can reach no other
// state; it is set once, by clinux_catch_signals, before any handler is installed.
static int clinux_signal_pipe = -1;

static void clinux_on_signal(int signo) {
    int saved = errno;
    unsigned char byte = (unsigned char)signo;
    (void)!write(clinux_signal_pipe, &byte, 1);  // async-signal-safe; a full pipe drops repeats
    errno = saved;
}

int clinux_catch_signals(const int *signals, int count) {
    int fds[2];
    if (clinux_signal_pipe >= 0 || pipe2(fds, O_CLOEXEC) != 0) return -1;
    fcntl(fds[1], F_SETFL, O_NONBLOCK);
    clinux_signal_pipe = fds[1];
    struct sigaction action;
    action.sa_handler = clinux_on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (int i = 0; i < count; i++) {
        if (sigaction(signals[i], &action, NULL) != 0) return -1;
    }
    return fds[0];
}

int clinux_signal_ignored(int signo) {
    struct sigaction current;
    if (sigaction(signo, NULL, &current) != 0) return 0;
    return !(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_IGN;
}

int clinux_gettid(void) {
    return (int)syscall(SYS_gettid);
}

long clinux_copy_file_range(int in, long long *in_offset, int out, long long *out_offset, unsigned long length) {
    loff_t from = *in_offset, to = *out_offset;
    ssize_t copied = copy_file_range(in, &from, out, &to, length, 0);
    *in_offset = from;
    *out_offset = to;
    return copied;
}

int clinux_o_direct(void) {
    return O_DIRECT;
}
