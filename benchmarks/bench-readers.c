// bench-readers: N HTTP clients GET one object at once on one epoll loop, for scripts/bench section 9
// (the 1 000 readers: the Python client spent ~190 s of its own time on 1 000 bodies).
// Each body is checked against the expected bytes: `--compare FILE` compares every body byte for
// byte with the origin's file (mapped once; equal bytes mean an equal SHA-256, at a fraction of
// the cost: hashing 1 000 bodies of 256 MiB took ~300 CPU-s of this client on this machine),
// `--sha256 HEX` hashes every body (libcrypto's SHA-256), `--discard` only counts them (recv with
// MSG_TRUNC: no copy into this process).
// Prints one JSON object with the same fields as `bench-clients.py proxy-get`, plus the client's CPU.
//
//   cc -O2 -o bench-readers bench-readers.c -lcrypto
//   bench-readers --port P --target T [--host H] --clients N --size BYTES
//                 [--compare FILE | --sha256 HEX | --discard] [--timeout S] [--rcvbuf BYTES]
// --target: the request target, e.g. /fetch?url=... (origin form) or http://host/path (a proxy's
// absolute form). Bodies: Content-Length or chunked. Loopback only (127.0.0.1); every wait bounded.
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum state { CONNECTING, CONNECTED, HEAD, BODY, DONE, FAILED };
enum chunk { C_SIZE, C_SIZE_LF, C_DATA, C_DATA_CR, C_DATA_LF, C_TRAILER, C_END };

struct reader {
  int fd;
  enum state state;
  char head[8192];
  int headLen;
  long long length;  // -1: chunked
  long long got;
  enum chunk cstate;
  long long chunkLeft;
  int trailerLineLen;
  EVP_MD_CTX *digest;
  double t0, headS, firstS, doneS;
  int localPort;  // the server logs it as the remote port
  char error[160];
};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmpDouble(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

// The same nearest-rank percentile as bench-clients.py's `percentile`.
static double percentile(double *v, int n, double q) {
  qsort(v, n, sizeof *v, cmpDouble);
  int k = (int)(q / 100.0 * (n - 1) + 0.5);
  if (k < 0) k = 0;
  if (k >= n) k = n - 1;
  return v[k];
}

static double started;

static void fail(struct reader *r, const char *why) {
  if (r->state == DONE || r->state == FAILED) return;
  if (r->state == BODY)  // where and when: to match the server's log of the same connection
    snprintf(r->error, sizeof r->error, "%s (at byte %lld of %lld, %.1f s after the start, port %d)", why, r->got,
             r->length, now() - started, r->localPort);
  else
    snprintf(r->error, sizeof r->error, "%s", why);
  r->state = FAILED;
  close(r->fd);
}

static int discardBodies, hashBodies;
static const unsigned char *reference;  // --compare: the expected body, mapped
static long long referenceSize;
static long long expectedSize;
static char expectedHash[65];
static unsigned char sink[1 << 18];

static void bodyBytes(struct reader *r, const unsigned char *p, long long n) {
  if (n <= 0) return;
  if (r->got == 0) r->firstS = now() - r->t0;
  if (reference && p) {
    if (r->got + n > referenceSize || memcmp(p, reference + r->got, (size_t)n) != 0) {
      fail(r, "body differs from the origin's file");
      return;
    }
  }
  r->got += n;
  if (hashBodies && p) EVP_DigestUpdate(r->digest, p, (size_t)n);
}

static void finishBody(struct reader *r) {
  if (r->got != expectedSize) {
    snprintf(r->error, sizeof r->error, "%lld of %lld bytes", r->got, expectedSize);
    r->state = FAILED;
  } else if (hashBodies) {
    unsigned char md[32];
    unsigned int len = 0;
    char hex[65];
    EVP_DigestFinal_ex(r->digest, md, &len);
    for (int i = 0; i < 32; i++) sprintf(hex + 2 * i, "%02x", md[i]);
    if (strcmp(hex, expectedHash) != 0) {
      snprintf(r->error, sizeof r->error, "body differs from the origin's file (SHA-256)");
      r->state = FAILED;
    }
  }
  if (r->state != FAILED) {
    r->state = DONE;
    r->doneS = now() - started;
  }
  close(r->fd);
}

// Chunked framing over bytes that are in memory; returns 0 when the body ended or failed.
static int chunked(struct reader *r, const unsigned char *p, long long n) {
  long long i = 0;
  while (i < n) {
    unsigned char c = p[i];
    switch (r->cstate) {
      case C_SIZE:
        if (c == '\r') r->cstate = C_SIZE_LF;
        else if (c == ';') r->cstate = C_SIZE_LF;  // extensions: skipped up to the LF
        else {
          int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
          if (d < 0 || r->chunkLeft > (1LL << 40)) { fail(r, "bad chunk size"); return 0; }
          r->chunkLeft = r->chunkLeft * 16 + d;
        }
        i++;
        break;
      case C_SIZE_LF:
        if (c == '\n') r->cstate = r->chunkLeft == 0 ? C_TRAILER : C_DATA;
        i++;
        break;
      case C_DATA: {
        long long take = n - i < r->chunkLeft ? n - i : r->chunkLeft;
        bodyBytes(r, p + i, take);
        if (r->state == FAILED) return 0;
        r->chunkLeft -= take;
        i += take;
        if (r->chunkLeft == 0) r->cstate = C_DATA_CR;
        break;
      }
      case C_DATA_CR:
        if (c != '\r') { fail(r, "bad chunk end"); return 0; }
        r->cstate = C_DATA_LF;
        i++;
        break;
      case C_DATA_LF:
        if (c != '\n') { fail(r, "bad chunk end"); return 0; }
        r->cstate = C_SIZE;
        r->chunkLeft = 0;
        i++;
        break;
      case C_TRAILER:  // lines until an empty one
        if (c == '\n') {
          if (r->trailerLineLen == 0) { finishBody(r); return 0; }
          r->trailerLineLen = 0;
        } else if (c != '\r') {
          r->trailerLineLen++;
        }
        i++;
        break;
      case C_END:
        return 0;
    }
  }
  return 1;
}

// The head is complete at `end` (offset after CRLFCRLF): status, framing; the rest is body.
static void parseHead(struct reader *r, int end) {
  r->headS = now() - r->t0;
  r->head[end - 1] = 0;
  int status = 0;
  if (sscanf(r->head, "HTTP/1.%*d %d", &status) != 1 || status != 200) {
    char why[64];
    snprintf(why, sizeof why, "status %d", status);
    fail(r, why);
    return;
  }
  r->length = -2;
  for (char *line = strstr(r->head, "\r\n"); line; line = strstr(line + 2, "\r\n")) {
    char *field = line + 2;
    if (strncasecmp(field, "content-length:", 15) == 0) r->length = atoll(field + 15);
    if (strncasecmp(field, "transfer-encoding:", 18) == 0 && strcasestr(field, "chunked")) r->length = -1;
  }
  if (r->length == -2) { fail(r, "neither Content-Length nor chunked"); return; }
  if (r->length >= 0 && discardBodies == 0 && r->length != expectedSize) { fail(r, "wrong Content-Length"); return; }
  r->state = BODY;
  if (hashBodies) {
    r->digest = EVP_MD_CTX_new();
    EVP_DigestInit_ex(r->digest, EVP_sha256(), NULL);
  }
  int rest = r->headLen - end;
  if (rest > 0) {
    if (r->length == -1) {
      chunked(r, (unsigned char *)r->head + end, rest);
      return;
    }
    bodyBytes(r, (unsigned char *)r->head + end, rest);
    if (r->state == FAILED) return;
  }
  if (r->length >= 0 && r->got >= r->length) finishBody(r);
}

static void readable(struct reader *r) {
  while (r->state == HEAD || r->state == BODY) {
    if (r->state == HEAD) {
      ssize_t n = recv(r->fd, r->head + r->headLen, sizeof r->head - 1 - r->headLen, 0);
      if (n < 0) { if (errno == EAGAIN) return; fail(r, "recv failed"); return; }
      if (n == 0) { fail(r, "closed before the head"); return; }
      int from = r->headLen > 3 ? r->headLen - 3 : 0;
      r->headLen += (int)n;
      r->head[r->headLen] = 0;
      char *end = memmem(r->head + from, r->headLen - from, "\r\n\r\n", 4);
      if (end) parseHead(r, (int)(end - r->head) + 4);
      else if (r->headLen >= (int)sizeof r->head - 1) fail(r, "head too large");
      continue;
    }
    // Body: a Content-Length body is read up to its end (more is an error), chunked as it comes.
    if (discardBodies && r->length >= 0) {
      ssize_t n = recv(r->fd, sink, sizeof sink, MSG_TRUNC);
      if (n < 0) { if (errno == EAGAIN) return; fail(r, "recv failed"); return; }
      if (n == 0) { if (r->got == r->length) finishBody(r); else fail(r, "closed inside the body"); return; }
      bodyBytes(r, NULL, n);
      if (r->got > r->length) { fail(r, "more bytes than Content-Length"); return; }
      if (r->got == r->length) { finishBody(r); return; }
      continue;
    }
    ssize_t n = recv(r->fd, sink, sizeof sink, 0);
    if (n < 0) { if (errno == EAGAIN) return; fail(r, "recv failed"); return; }
    if (n == 0) {
      if (r->length >= 0 && r->got == r->length) finishBody(r);
      else fail(r, "closed inside the body");
      return;
    }
    if (r->length == -1) {
      if (!chunked(r, sink, n)) return;
      continue;
    }
    if (r->got + n > r->length) { fail(r, "more bytes than Content-Length"); return; }
    bodyBytes(r, sink, n);
    if (r->state == FAILED) return;
    if (r->got == r->length) { finishBody(r); return; }
  }
}

static double cpuSeconds(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv) {
  int port = 0, clients = 1, rcvbuf = 0;
  double timeout = 120;
  const char *target = NULL, *host = "127.0.0.1";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--discard")) { discardBodies = 1; continue; }
    if (!v) { fprintf(stderr, "bench-readers: %s needs a value\n", a); return 2; }
    i++;
    if (!strcmp(a, "--port")) port = atoi(v);
    else if (!strcmp(a, "--target")) target = v;
    else if (!strcmp(a, "--host")) host = v;
    else if (!strcmp(a, "--clients")) clients = atoi(v);
    else if (!strcmp(a, "--size")) expectedSize = atoll(v);
    else if (!strcmp(a, "--timeout")) timeout = atof(v);
    else if (!strcmp(a, "--rcvbuf")) rcvbuf = atoi(v);
    else if (!strcmp(a, "--compare")) {
      int fd = open(v, O_RDONLY | O_CLOEXEC);
      struct stat st;
      if (fd < 0 || fstat(fd, &st) != 0) { fprintf(stderr, "bench-readers: cannot open %s\n", v); return 2; }
      reference = st.st_size > 0 ? mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
      if (reference == MAP_FAILED) { fprintf(stderr, "bench-readers: cannot map %s\n", v); return 2; }
      referenceSize = st.st_size;
      if (!expectedSize) expectedSize = st.st_size;
      close(fd);
    }
    else if (!strcmp(a, "--sha256")) { hashBodies = 1; snprintf(expectedHash, sizeof expectedHash, "%s", v); }
    else { fprintf(stderr, "bench-readers: unknown option %s\n", a); return 2; }
  }
  if (!port || !target || clients < 1 || hashBodies + discardBodies + (reference != NULL) > 1) {
    fprintf(stderr, "usage: bench-readers --port P --target T [--host H] --clients N --size B [--compare FILE | --sha256 HEX | --discard] [--timeout S] [--rcvbuf B]\n");
    return 2;
  }
  char request[8192];
  int requestLen = snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target, host);
  if (requestLen >= (int)sizeof request) { fprintf(stderr, "bench-readers: target too long\n"); return 2; }
  struct rlimit nofile;
  getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;
  setrlimit(RLIMIT_NOFILE, &nofile);

  struct reader *readers = calloc(clients, sizeof *readers);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  double deadline = now() + timeout;
  // Every connection open before the requests go out (as the Python client does), at most 256 in
  // flight at once so a listen backlog is never overrun.
  int connecting = 0, opened = 0, settled = 0;
  struct epoll_event events[1024];
  while (settled < clients && now() < deadline) {
    while (opened < clients && connecting < 256) {
      struct reader *r = &readers[opened];
      r->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (rcvbuf > 0) setsockopt(r->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
      int rc = connect(r->fd, (struct sockaddr *)&addr, sizeof addr);
      if (rc < 0 && errno != EINPROGRESS) {
        fail(r, "connect failed");
        opened++, settled++;
        continue;
      }
      struct epoll_event ev = {.events = EPOLLOUT, .data.u32 = (uint32_t)opened};
      epoll_ctl(ep, EPOLL_CTL_ADD, r->fd, &ev);
      r->state = CONNECTING;
      opened++, connecting++;
    }
    int n = epoll_wait(ep, events, 1024, 200);
    for (int i = 0; i < n; i++) {
      struct reader *r = &readers[events[i].data.u32];
      if (r->state != CONNECTING) continue;
      connecting--, settled++;
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(r->fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err) { fail(r, "connect failed"); continue; }
      struct sockaddr_in local;
      socklen_t localLen = sizeof local;
      if (getsockname(r->fd, (struct sockaddr *)&local, &localLen) == 0) r->localPort = ntohs(local.sin_port);
      struct epoll_event ev = {.events = 0, .data.u32 = events[i].data.u32};
      epoll_ctl(ep, EPOLL_CTL_MOD, r->fd, &ev);
      r->state = CONNECTED;
    }
  }
  double cpu0 = cpuSeconds();
  started = now();
  int live = 0;
  for (int i = 0; i < clients; i++) {
    struct reader *r = &readers[i];
    if (r->state != CONNECTED) { if (r->state == CONNECTING) fail(r, "connect timed out"); continue; }
    r->t0 = now();
    if (send(r->fd, request, requestLen, MSG_NOSIGNAL) != requestLen) { fail(r, "send failed"); continue; }
    r->state = HEAD;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)i};
    epoll_ctl(ep, EPOLL_CTL_MOD, r->fd, &ev);
    live++;
  }
  while (live > 0 && now() < deadline) {
    int n = epoll_wait(ep, events, 1024, 200);
    for (int i = 0; i < n; i++) {
      struct reader *r = &readers[events[i].data.u32];
      if (r->state != HEAD && r->state != BODY) continue;
      readable(r);
      if (r->state == DONE || r->state == FAILED) live--;
    }
  }
  double cpu = cpuSeconds() - cpu0;

  int ok = 0, errors = 0, nh = 0, nf = 0;
  double *heads = calloc(clients, sizeof(double)), *firsts = calloc(clients, sizeof(double)), last = 0;
  char firstErrors[3][160];
  for (int i = 0; i < clients; i++) {
    struct reader *r = &readers[i];
    if (r->headS > 0) heads[nh++] = r->headS;
    if (r->firstS > 0) firsts[nf++] = r->firstS;
    if (r->state == DONE) {
      ok++;
      if (r->doneS > last) last = r->doneS;
    } else {
      if (r->state != FAILED) snprintf(r->error, sizeof r->error, "timed out");
      if (errors < 3) snprintf(firstErrors[errors], sizeof firstErrors[0], "%s", r->error);
      errors++;
    }
    if (r->digest) EVP_MD_CTX_free(r->digest);
  }
  printf("{\"clients\": %d, \"ok\": %d, \"errors\": %d, \"first_errors\": [", clients, ok, errors);
  for (int i = 0; i < errors && i < 3; i++) printf("%s\"%s\"", i ? ", " : "", firstErrors[i]);
  printf("], ");
  if (nh) {
    double p50 = 1000 * percentile(heads, nh, 50), p99 = 1000 * percentile(heads, nh, 99);
    printf("\"head_p50_ms\": %.3f, \"head_p99_ms\": %.3f, ", p50, p99);
  } else {
    printf("\"head_p50_ms\": null, \"head_p99_ms\": null, ");
  }
  if (nf) {
    double p50 = 1000 * percentile(firsts, nf, 50), p99 = 1000 * percentile(firsts, nf, 99);
    printf("\"first_byte_p50_ms\": %.3f, \"first_byte_p99_ms\": %.3f, ", p50, p99);
  } else {
    printf("\"first_byte_p50_ms\": null, \"first_byte_p99_ms\": null, ");
  }
  if (ok) printf("\"last_done_s\": %.4f, ", last);
  else printf("\"last_done_s\": null, ");
  printf("\"client_cpu_s\": %.3f, \"checked\": \"%s\"}\n", cpu, hashBodies ? "sha256" : reference ? "compared" : discardBodies ? "counted" : "length");
  return 0;
}
