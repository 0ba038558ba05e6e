#ifndef CLINUX_H
#define CLINUX_H
// Linux-only declarations that `import Glibc` does not expose to Swift.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/sendfile.h>
#include <sys/timerfd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

int accept4(int sockfd, struct sockaddr *addr, socklen_t *addrlen, int flags);

#endif
