/* kube/limits-int.h - every limit of the kube layer, in one place, each
 * with its reason (as SQLite's sqliteLimit.h). Each may be set at compile
 * time (-DKCR__POOL_MAX=128); the defaults are what the tests run with.
 * The limits a user sets at run time are options, not here:
 * kcr_client_opts.max_response_bytes (KCR_CLIENT_MAX_RESPONSE),
 * timeout_ms, connect_timeout_ms. */
#ifndef KCR_KUBE_LIMITS_INT_H
#define KCR_KUBE_LIMITS_INT_H

#include <stddef.h>
#include <stdint.h>

/* Idle connections a client keeps (client.c's pool): more than the
 * threads that make requests at once in any program here (workers, event
 * senders, informers, elector); one over it is closed when given back. */
#ifndef KCR__POOL_MAX
#define KCR__POOL_MAX 64
#endif

/* Bytes of an error (non-2xx) body kept, for a request's answer and a
 * watch's alike: a Status is well under 1 KiB, an HTML page from a proxy
 * a few KiB; the rest is read and dropped, so a hostile server cannot make
 * an error cost memory. */
#ifndef KCR__ERRBODY_MAX
#define KCR__ERRBODY_MAX ((size_t)64 << 10)
#endif

/* A pooled own connection's request buffer is kept up to this size between
 * requests (bigger ones are freed: the pool keeps no large buffers, and the
 * buffer held a bearer token, wiped either way). */
#ifndef KCR__MSG_KEEP
#define KCR__MSG_KEEP ((size_t)64 << 10)
#endif

/* Most of an answer's body reserved before it comes (from its
 * Content-Length): a told length is trusted only this far, so a lying
 * header cannot make one allocation of max_response_bytes. */
#ifndef KCR__BODY_RESERVE_MAX
#define KCR__BODY_RESERVE_MAX ((uint64_t)1 << 20)
#endif

/* The most the first send of a request on an own connection hands to TLS:
 * one record's worth of plaintext (TLS's 16 KiB), so that when that send
 * fails no whole record - nothing the server could read - has left, and
 * the request may be sent again whatever its verb (transport_own.c,
 * OWN_UNSENT). */
#ifndef KCR__FIRST_SEND
#define KCR__FIRST_SEND ((size_t)16384)
#endif

/* What every read on an own connection asks for (curl_easy_recv; the
 * handle's CURLOPT_BUFFERSIZE, which caps it, is set to the same): at
 * least one TLS record's plaintext (TLS's 16 KiB, RFC 8446 5.1), so that
 * the record a read decrypts is handed over whole and OpenSSL, which
 * reads no further than that record (read-ahead off), is left holding no
 * plaintext that poll() on the socket cannot see (transport_own.c,
 * DESIGN: TLS).
 * At most curl's CURL_MAX_READ_SIZE; on the reading thread's stack. */
#ifndef KCR__RECV_BUF
#define KCR__RECV_BUF ((size_t)16384)
#endif
_Static_assert(KCR__RECV_BUF >= 16384, "KCR__RECV_BUF: less than a TLS record");

/* The libcurl versions the exchanges on connections of our own were tested
 * with (curl_version_info's version_num): 7.88.x, [MIN, END). Any other
 * makes every request a curl transfer (client.c, DESIGN: The switch). */
#ifndef KCR__OWN_CURL_MIN
#define KCR__OWN_CURL_MIN 0x075800
#endif
#ifndef KCR__OWN_CURL_END
#define KCR__OWN_CURL_END 0x075900
#endif

/* A watch keeps its scratch buffer (an event's text without managedFields)
 * between events up to this size. */
#ifndef KCR__WATCH_SCRATCH_KEEP
#define KCR__WATCH_SCRATCH_KEEP ((size_t)64 << 10)
#endif

/* Largest file the config reads: kubeconfig, CA bundle, client
 * certificate and key (a CA bundle of a few hundred certificates is under
 * 1 MiB). */
#ifndef KCR__CONFIG_FILE_MAX
#define KCR__CONFIG_FILE_MAX (16u << 20)
#endif

/* Largest bearer token file (a ServiceAccount token is about 1 KiB). */
#ifndef KCR__CONFIG_TOKEN_MAX
#define KCR__CONFIG_TOKEN_MAX (1u << 20)
#endif

/* An exec credential plugin: its wall-clock limit, and the most of its
 * standard output read (an ExecCredential is small). */
#ifndef KCR__EXEC_TIMEOUT_MS
#define KCR__EXEC_TIMEOUT_MS 60000u
#endif
#ifndef KCR__EXEC_MAX_STDOUT
#define KCR__EXEC_MAX_STDOUT (1u << 20)
#endif

/* The HTTP/1.1 reader (h1.c): the longest status or header line, the
 * largest head, and the interim (1xx) answers skipped before the answer -
 * Go's net/http server writes heads of a few hundred bytes. */
#ifndef KCR__H1_LINE_MAX
#define KCR__H1_LINE_MAX 8192
#endif
#ifndef KCR__H1_HEAD_MAX
#define KCR__H1_HEAD_MAX (64 * 1024)
#endif
#ifndef KCR__H1_INTERIM_MAX
#define KCR__H1_INTERIM_MAX 16
#endif

#endif
