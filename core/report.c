/*
 * report.c - X and Z reports (see report.h).
 */
#include "report.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "charges.h"
#include "crypto.h"
#include "err.h"
#include "json.h"

/* {"amount","charges","net","refunded","refunds"} of one line. */
static cJSON *line_json(const struct pt_report_line *l)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "charges", (double)l->charges);
    cJSON_AddNumberToObject(o, "amount", (double)l->amount);
    cJSON_AddNumberToObject(o, "refunds", (double)l->refunds);
    cJSON_AddNumberToObject(o, "refunded", (double)l->refunded);
    cJSON_AddNumberToObject(o, "net", (double)(l->amount - l->refunded));
    return o;
}

/* The object under parent named name, created when missing. */
static cJSON *child(cJSON *parent, const char *name)
{
    cJSON *c = cJSON_GetObjectItemCaseSensitive(parent, name);
    if (!c)
        c = cJSON_AddObjectToObject(parent, name);
    return c;
}

/* totals: gateway -> method -> currency -> line. */
static cJSON *totals_json(const struct pt_report_line *lines, int n)
{
    cJSON *t = cJSON_CreateObject();
    for (int i = 0; t && i < n; i++) {
        cJSON *m = child(child(t, lines[i].gateway), lines[i].method);
        cJSON *l = line_json(&lines[i]);
        if (!m || !l || !cJSON_AddItemToObject(m, lines[i].currency, l)) {
            cJSON_Delete(l);
            cJSON_Delete(t);
            return NULL;
        }
    }
    return t;
}

/* What is still open on the lane: charges and refunds together. */
static int open_json(struct pt_store *st, cJSON *report)
{
    struct pt_store_stats c;
    struct pt_refund_stats r;
    int rc = pt_store_stats(st, 0, &c);
    if (rc == PT_OK)
        rc = pt_store_refund_stats(st, &r);
    if (rc)
        return rc;
    cJSON *o = cJSON_AddObjectToObject(report, "open");
    if (!o)
        return PT_ENOMEM;
    /* Queued: not sent yet, or being sent (no outcome to wait for yet). */
    int64_t queued = c.by_state[PT_STATE_INIT] + c.by_state[PT_STATE_PROCESSING] +
                     r.by_state[PT_STATE_INIT] + r.by_state[PT_STATE_PROCESSING];
    cJSON_AddNumberToObject(o, "queued", (double)queued);
    cJSON_AddNumberToObject(o, "pending",
                            (double)(c.by_state[PT_STATE_PENDING] + r.by_state[PT_STATE_PENDING]));
    cJSON_AddNumberToObject(o, "unknown",
                            (double)(c.by_state[PT_STATE_UNKNOWN] + r.by_state[PT_STATE_UNKNOWN]));
    cJSON_AddNumberToObject(o, "review", (double)(c.review + r.review));
    return PT_OK;
}

/* The members both reports have.  *from: the last report's end, 0 before
 * the first, which then begins at its first row. */
static int report_body(struct pt_store *st, const char *lane, int64_t z, int64_t *from, int64_t to,
                       cJSON *report)
{
    struct pt_report_line *lines = NULL;
    int n = 0;
    int64_t first = 0;
    int rc = pt_store_report_totals(st, z, &lines, &n, &first);
    if (rc)
        return rc;
    if (*from <= 0)
        *from = first > 0 && first < to ? first : to;
    char t[32];
    pt_rfc3339(*from, t);
    cJSON_AddStringToObject(report, "from", t);
    pt_rfc3339(to, t);
    cJSON_AddStringToObject(report, "to", t);
    cJSON_AddStringToObject(report, "lane_id", lane);
    cJSON *totals = totals_json(lines, n);
    free(lines);
    if (!totals || !cJSON_AddItemToObject(report, "totals", totals)) {
        cJSON_Delete(totals);
        return PT_ENOMEM;
    }
    return open_json(st, report);
}

/* Canonical text of report into *json. */
static int finish(cJSON *report, char **json)
{
    *json = pt_json_canonical(report);
    return *json ? PT_OK : PT_ENOMEM;
}

int pt_report_x(struct pt_store *st, const char *lane, int64_t now, char **json)
{
    *json = NULL;
    int64_t last = 0, last_to = 0;
    char prev[65];
    int rc = pt_store_z_last(st, &last, &last_to, prev);
    if (rc && rc != PT_ENOTFOUND)
        return rc;
    cJSON *report = cJSON_CreateObject();
    if (!report)
        return PT_ENOMEM;
    /* z: the number the next close gives these totals. */
    cJSON_AddNumberToObject(report, "z", (double)(last + 1));
    rc = report_body(st, lane, 0, &last_to, now > last_to ? now : last_to, report);
    if (rc == PT_OK)
        rc = finish(report, json);
    cJSON_Delete(report);
    return rc;
}

int pt_report_hash_of(const char *json, char hex[65])
{
    cJSON *o = cJSON_Parse(json);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return PT_EPARSE;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(o, "hash");
    char *canon = pt_json_canonical(o);
    cJSON_Delete(o);
    if (!canon)
        return PT_ENOMEM;
    unsigned char md[32];
    int rc = pt_sha256(canon, strlen(canon), md);
    free(canon);
    if (rc == PT_OK)
        pt_hex_encode(md, sizeof md, hex);
    return rc;
}

int pt_report_close(struct pt_store *st, const char *lane, int64_t now, char **json, int64_t *z)
{
    *json = NULL;
    int64_t last = 0, last_to = 0;
    char prev[65] = PT_REPORT_GENESIS;
    int rc = pt_store_z_lock(st);
    if (rc == PT_OK && (rc = pt_store_z_last(st, &last, &last_to, prev)) == PT_ENOTFOUND)
        rc = PT_OK;
    if (rc)
        return rc;
    *z = last + 1;
    /* A clock set back since the last close (SPEC 17) does not make a day
     * end before it began. */
    int64_t to = now > last_to ? now : last_to;
    if ((rc = pt_store_z_mark(st, *z, NULL, NULL)))
        return rc;
    cJSON *report = cJSON_CreateObject();
    if (!report)
        return PT_ENOMEM;
    cJSON_AddNumberToObject(report, "z", (double)*z);
    cJSON_AddStringToObject(report, "prev_hash", prev);
    int64_t from = last_to;
    rc = report_body(st, lane, *z, &from, to, report);
    char *unhashed = NULL, hex[65];
    unsigned char md[32];
    if (rc == PT_OK)
        rc = finish(report, &unhashed);
    if (rc == PT_OK && (rc = pt_sha256(unhashed, strlen(unhashed), md)) == PT_OK) {
        pt_hex_encode(md, sizeof md, hex);
        cJSON_AddStringToObject(report, "hash", hex);
        rc = finish(report, json);
    }
    free(unhashed);
    if (rc == PT_OK)
        rc = pt_store_z_insert(st, *z, lane, from, to, hex, *json, now);
    cJSON_Delete(report);
    if (rc) {
        free(*json);
        *json = NULL;
    }
    return rc;
}
