/*
 * intake_impl.h - what the files of the guarded operations share (intake.h
 * is what the API sees): intake.c holds the guard every operation goes
 * through and POST /v1/charges; intake_order.c cancel, review and the
 * payment link; intake_refund.c refunds.  Internal names crossing these
 * files are pt__intake_* (STYLE.md).
 */
#ifndef PT_INTAKE_IMPL_H
#define PT_INTAKE_IMPL_H

#include "intake.h"
#include "charges.h"
#include "refunds.h"
#include "crypto.h"
#include "err.h"
#include "fallback.h"
#include "gateway.h"
#include "json.h"
#include "log.h"
#include "money.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCOPE_CHARGES "POST /v1/charges"

/* How long a client should wait before retrying, in seconds. */
#define RETRY_IN_USE_S 1
#define RETRY_OFFLINE_S 5
#define RETRY_STORAGE_S 2

/* The guard of one request: its key, its body, its lock (intake.c). */
struct guard {
    char key[256];
    char scope[160];
    unsigned char hash[32];
    cJSON *json;      /* parsed body, NULL when empty or refused */
    int body_is_json; /* fingerprinted in canonical form */
    /* Why pt_json_check refused the body ("field: problem"), "" if it did not. */
    char refused[PT_JSON_FIELD_MAX + 112];
    /* The raw text of the body's "amount": integers are read from their
     * digits, never from cJSON's double. */
    struct pt_json_member amount;
    int in_txn;
    struct pt_key_lock lock; /* the key's lock this request holds */
};

/* What the guard does once a step of a new charge or refund has written *out. */
enum step {
    STEP_COMPLETE, /* store *out as the key's answer, commit */
    STEP_RELEASE,  /* roll back: nothing of this request stays, the key is free */
    STEP_DONE,     /* already committed (or answered as the key) */
};

/* The store error behind the last 503 storage_unavailable this thread
 * answered (intake.c), for the callers that report it. */
extern _Thread_local int pt__intake_last_storage_rc;

/* intake.c: answers, the guard's steps (enter, complete, abandon, answer
 * as the key recorded), the lane's own store for a charge queued there,
 * the field checks the operations share, and the charge of an order. */
void pt__intake_set_body(struct pt_reply *r, char *text);
void pt__intake_storage_unavailable(struct pt_reply *r, struct pt_store *st, int rc);
void pt__intake_wake_to_wipe(const struct pt_intake *in);
void pt__intake_guard_free(struct guard *g);
struct pt_intake pt__intake_on_the_lane(const struct pt_intake *in);
int pt__intake_answered_locally(const struct pt_intake *in, const char *path,
                                const char *key_header, const char *body, size_t len,
                                int empty_is_object, int64_t now, struct pt_reply *out);
int pt__intake_guard_enter(const struct pt_intake *in, struct pt_store *st, const char *path,
                           const char *key_header, const char *body, size_t len,
                           int empty_is_object, int64_t now, struct guard *g, struct pt_reply *out,
                           struct pt_idem_result *res);
int pt__intake_answer_as_the_key(struct pt_store *st, struct guard *g, struct pt_reply *out);
int pt__intake_guard_complete(struct pt_store *st, struct guard *g, struct pt_reply *out,
                              int64_t now);
void pt__intake_guard_abandon(struct pt_store *st, struct guard *g);
/* A guarded operation that met store error rc: what it wrote is rolled
 * back and 503 storage_unavailable answered. */
void pt__intake_guard_storage(struct pt_store *st, struct guard *g, struct pt_reply *out, int rc);
/* The end of every guarded operation: the key's result and the guard
 * freed; returns the store error behind a 503, PT_OK for any other answer. */
int pt__intake_guard_end(struct guard *g, struct pt_idem_result *res, const struct pt_reply *out,
                         int rc);
void pt__intake_problem(char *msg, size_t cap, const char *field, const char *text);
/* A guarded request's body: 0 with the problem in msg when the guard
 * refused it or it is not a JSON object; else 1, each member not named in
 * fields (NULL-terminated) added to msg as an unknown field. */
int pt__intake_body_fields(const struct guard *g, const char *const fields[], char *msg,
                           size_t cap);
int pt__intake_string_field(const cJSON *body, const char *name, const cJSON **out);
int pt__intake_charset_ok(const char *s, size_t min, size_t max, const char *extra);
int pt__intake_text_ok(const char *s, size_t max_bytes);
int pt__intake_operator_actor(const cJSON *body, char actor[80], char *msg, size_t cap);
void pt__intake_metadata_field(const cJSON *v, char *out, size_t outcap, char *msg, size_t cap);
int pt__intake_needs_gateway(const struct pt_charge *c);
int pt__intake_find_order(struct pt_store *st, struct guard *g, const char *order_id,
                          struct pt_charge *c, struct pt_reply *out);
/* When id (kind "charge": an order_id, "refund": a refund_id) belongs to a
 * record retention archived (SPEC 19): *out is the 409 that says so, and 1.
 * Else 0 and *out untouched. */
int pt__intake_archived(struct pt_store *st, const char *kind, const char *id,
                        struct pt_reply *out);

#endif
