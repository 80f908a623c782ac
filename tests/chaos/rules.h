/* tests/chaos/rules.h - the fault rules of chaosproxy: their text form,
 * how a request is classified, and which rule (if any) a request meets.
 *
 * A rules text has one rule per line; blank lines and lines starting with
 * '#' are ignored. A rule is a fault name followed by key=value words:
 *
 *   status  code=429 retry-after=1 verb=PATCH,POST resource=ebds rate=0.05
 *   delay   ms=300 rate=0.1
 *   reset   verb=GET,LIST rate=0.02
 *   truncate bytes=100 verb=LIST rate=0.02
 *   garble  verb=GET,LIST agent=ebdman rate=0.02
 *   drip    bytes=16 ms=20 rate=0.01
 *   cut     after-ms=3000 after-bytes=65536
 *
 * Faults (what the proxy does to a request that meets the rule):
 *   delay     waits ms (required) before forwarding it.
 *   reset     resets the client's connection (TCP RST) before forwarding:
 *             the apiserver never sees the request.
 *   status    answers code (400..599, required) itself with a Status body,
 *             and Retry-After: retry-after seconds when given (default 1 for
 *             429, none otherwise); the request is not forwarded.
 *   truncate  forwards it and closes the connection after bytes (default:
 *             half the body, or 16 when its length is unknown) of the body.
 *   garble    forwards it and overwrites bytes of the body (its first byte,
 *             so a JSON parser always fails, and every 61st of its first
 *             4 KiB) with '~'.
 *   drip      forwards it and writes the answer (head and body) bytes
 *             (default 16) at a time, ms (default 50) apart.
 *   cut       (watches only) forwards the watch and closes it mid-document
 *             once after-bytes of the stream went through (inside that
 *             chunk) or after-ms passed (then it first writes the start of
 *             a document, without its end); at least one of them is needed.
 * Keys every rule takes:
 *   verb=V[,V...]      GET LIST WATCH POST PUT PATCH DELETE (default: any;
 *                      a cut rule: WATCH only). LIST and WATCH are GETs of
 *                      a collection, WATCH with watch=1|true in the query.
 *   resource=R[,R...]  the resource ("ebds", "configmaps", "leases"); R
 *                      alone also matches its subresources, "ebds/status"
 *                      only that subresource.
 *   path=REGEX         POSIX extended regex searched in the request target
 *                      (path and query); no spaces.
 *   agent=NAME         the User-Agent's product ("ebdman" of "ebdman/0.1 ...").
 *   rate=P             probability in [0, 1] (default 1).
 *   max=N              at most N injections by this rule (default: no limit).
 *
 * Choice: rules are tried in order; for each rule the request matches (and
 * whose max is not reached) a number is drawn from the seeded generator and
 * the rule applies when it is below rate. The first rule that applies wins;
 * at most one fault per request. The same seed gives the same sequence of
 * draws; with concurrent clients the order in which requests draw varies.
 *
 * Thread safety: a rule set is used by one thread at a time (chaosproxy
 * draws under its lock); chaos_classify is pure. */
#ifndef CHAOS_RULES_H
#define CHAOS_RULES_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/err.h"

enum chaos_verb {
  CHAOS_GET,
  CHAOS_LIST,
  CHAOS_WATCH,
  CHAOS_POST,
  CHAOS_PUT,
  CHAOS_PATCH,
  CHAOS_DELETE,
  CHAOS_OTHER,
  CHAOS_NVERBS
};

enum chaos_fault {
  CHAOS_NONE,
  CHAOS_DELAY,
  CHAOS_RESET,
  CHAOS_STATUS,
  CHAOS_TRUNCATE,
  CHAOS_GARBLE,
  CHAOS_DRIP,
  CHAOS_CUT
};

/* What a rule is matched against. */
struct chaos_req {
  enum chaos_verb verb;
  char resource[64];  /* "" for non-resource paths (/healthz, /version) */
  char sub[64];       /* subresource ("status") or "" */
  const char *target; /* borrowed: the request target, path and query */
  char agent[33];     /* see chaos_agent */
};

/* What the proxy does: a copy of the chosen rule's parameters (0: unset). */
struct chaos_action {
  enum chaos_fault fault;
  long ms, bytes, code, retry_after, after_ms, after_bytes;
  int line; /* of the rule in its text, for messages */
};

struct chaos_rule {
  struct chaos_action a;
  unsigned verbs; /* bit (1 << chaos_verb) per verb; 0: any */
  char **resources;
  size_t nresources;
  char *agent;
  regex_t path;
  bool has_path;
  double rate;
  long max, hits;
};

struct chaos_rules {
  struct chaos_rule *r;
  size_t n;
};

/* Parses a rules text (see above) into *out (free with chaos_rules_free).
 * Errors: KCR_EINVAL with ei->message naming the line and the word that is
 * wrong and what is wanted; KCR_ENOMEM. *out is NULL on error. */
kcr_err chaos_rules_parse(const char *text, struct chaos_rules **out,
                          struct kcr_errinfo *ei);
void chaos_rules_free(struct chaos_rules *rs);

/* Classifies a request from its method and target into *out (target is
 * borrowed by out->target); agent is the User-Agent header or NULL. */
void chaos_classify(const char *method, const char *target, const char *user_agent,
                    struct chaos_req *out);

/* The product of a User-Agent ("ebdman" for "ebdman/0.1 (host) libkcr/0.1"):
 * up to the first '/' or space, characters outside [A-Za-z0-9._-] dropped,
 * at most 32; "unknown" when that leaves nothing. */
void chaos_agent(const char *user_agent, char out[33]);

/* Draws for the request (see Choice above) with the generator state *rng;
 * on a hit copies the rule's action into *out and returns true (the rule's
 * hit count goes up); returns false (out->fault CHAOS_NONE) otherwise. */
bool chaos_rules_pick(struct chaos_rules *rs, const struct chaos_req *rq, uint64_t *rng,
                      struct chaos_action *out);

/* Names for logs and metrics: "GET", ...; "delay", ..., "status_429". */
const char *chaos_verb_name(enum chaos_verb v);
void chaos_fault_name(const struct chaos_action *a, char out[16]);

#endif
