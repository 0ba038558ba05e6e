#ifndef CTLS_SHIM_H
#define CTLS_SHIM_H
// libssl for what libcurl's SSL_CTX callback may do (add trusted certificates, watch handshake
// alerts) and PEM parsing, with functions for the macros Swift cannot import.
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/pem.h>
#include <openssl/err.h>
#include <openssl/opensslv.h>

static inline int ctls_cb_alert(void) { return SSL_CB_ALERT; }
static inline int ctls_cb_write(void) { return SSL_CB_WRITE; }
/// The reason of the newest error queued on this thread (0 when none), e.g. for
/// SSL_R_UNEXPECTED_EOF_WHILE_READING.
static inline int ctls_last_error_reason(void) { return ERR_GET_REASON(ERR_peek_last_error()); }
static inline int ctls_reason_unexpected_eof(void) { return SSL_R_UNEXPECTED_EOF_WHILE_READING; }
#endif
