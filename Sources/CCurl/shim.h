#ifndef CCURL_SHIM_H
#define CCURL_SHIM_H
// Typed, non-variadic wrappers around libcurl's variadic curl_easy_setopt / curl_easy_getinfo,
// which Swift cannot call directly.
#include <curl/curl.h>

static inline CURLcode ccurl_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_setopt_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_setopt_pointer(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_setopt_write_function(CURL *h, size_t (*f)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, f);
}
static inline CURLcode ccurl_setopt_header_function(CURL *h, size_t (*f)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, f);
}
static inline CURLcode ccurl_setopt_xferinfo_function(CURL *h, int (*f)(void *, curl_off_t, curl_off_t, curl_off_t, curl_off_t)) {
    return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, f);
}
static inline CURLcode ccurl_setopt_opensocket_function(CURL *h, curl_socket_t (*f)(void *, curlsocktype, struct curl_sockaddr *)) {
    return curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, f);
}
static inline CURLcode ccurl_setopt_sockopt_function(CURL *h, int (*f)(void *, curl_socket_t, curlsocktype)) {
    return curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, f);
}
static inline CURLcode ccurl_setopt_prereq_function(CURL *h, int (*f)(void *, char *, char *, int, int)) {
    return curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, f);
}
static inline CURLcode ccurl_setopt_resolver_start_function(CURL *h, int (*f)(void *, void *, void *)) {
    return curl_easy_setopt(h, CURLOPT_RESOLVER_START_FUNCTION, f);
}
static inline CURLcode ccurl_setopt_ssl_ctx_function(CURL *h, CURLcode (*f)(CURL *, void *, void *)) {
    return curl_easy_setopt(h, CURLOPT_SSL_CTX_FUNCTION, f);
}
static inline CURLcode ccurl_setopt_debug_function(CURL *h, int (*f)(CURL *, curl_infotype, char *, size_t, void *)) {
    return curl_easy_setopt(h, CURLOPT_DEBUGFUNCTION, f);
}
/// The connect address inside a curl_sockaddr (its `addr` field is really sized by `addrlen`, e.g. a
/// sockaddr_in6, so Swift must not copy the 16-byte `struct sockaddr` field by value).
static inline const struct sockaddr *ccurl_sockaddr_address(const struct curl_sockaddr *a) { return &a->addr; }
static inline long ccurl_global_all(void) { return CURL_GLOBAL_ALL; }
static inline curl_version_info_data *ccurl_version_info(void) { return curl_version_info(CURLVERSION_NOW); }
static inline CURLcode ccurl_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode ccurl_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode ccurl_getinfo_string(CURL *h, CURLINFO i, char **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode ccurl_getinfo_pointer(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLMcode ccurl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }

/// CURL_WRITEFUNC_PAUSE and CURL_READFUNC_ABORT are macros Swift cannot import as size_t.
static inline size_t ccurl_writefunc_pause(void) { return CURL_WRITEFUNC_PAUSE; }
static inline curl_socket_t ccurl_socket_bad(void) { return CURL_SOCKET_BAD; }
#endif
