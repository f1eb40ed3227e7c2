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
    if (!cJSON_AddNumberToObject(o, "charges", (double)l->charges) ||
        !cJSON_AddNumberToObject(o, "amount", (double)l->amount) ||
        !cJSON_AddNumberToObject(o, "refunds", (double)l->refunds) ||
        !cJSON_AddNumberToObject(o, "refunded", (double)l->refunded) ||
        !cJSON_AddNumberToObject(o, "net", (double)(l->amount - l->refunded))) {
        cJSON_Delete(o);
        return NULL;
    }
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
    int64_t n[4];
    int rc = pt_store_z_open(st, n);
    if (rc)
        return rc;
    cJSON *o = cJSON_AddObjectToObject(report, "open");
    /* Queued: not sent yet, or being sent (no outcome to wait for yet). */
    if (!o || !cJSON_AddNumberToObject(o, "queued", (double)n[0]) ||
        !cJSON_AddNumberToObject(o, "pending", (double)n[1]) ||
        !cJSON_AddNumberToObject(o, "unknown", (double)n[2]) ||
        !cJSON_AddNumberToObject(o, "review", (double)n[3]))
        return PT_ENOMEM;
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
    char f[32], t[32];
    pt_rfc3339(*from, f);
    pt_rfc3339(to, t);
    if (!cJSON_AddStringToObject(report, "from", f) || !cJSON_AddStringToObject(report, "to", t) ||
        !cJSON_AddStringToObject(report, "lane_id", lane)) {
        free(lines);
        return PT_ENOMEM;
    }
    cJSON *totals = totals_json(lines, n);
    free(lines);
    if (!totals || !cJSON_AddItemToObject(report, "totals", totals)) {
        cJSON_Delete(totals);
        return PT_ENOMEM;
    }
    return open_json(st, report);
}

/* Canonical text of report into *json - once every member it must have
 * is there: a report is stored for ever, and a member lost to a failed
 * allocation would be lost with it. */
static int finish(cJSON *report, char **json)
{
    static const char *const members[] = {"z", "from", "to", "lane_id", "totals", "open"};
    *json = NULL;
    for (size_t i = 0; i < sizeof members / sizeof members[0]; i++)
        if (!cJSON_GetObjectItemCaseSensitive(report, members[i]))
            return PT_ENOMEM;
    *json = pt_json_canonical(report);
    return *json ? PT_OK : PT_ENOMEM;
}

/* One X report; *moved when a close committed while it was read (its z
 * and its totals would be of two different days). */
static int x_once(struct pt_store *st, const char *lane, int64_t now, char **json, int *moved)
{
    int64_t last = 0, last_to = 0, again = 0, again_to = 0;
    char prev[65];
    int rc = pt_store_z_last(st, &last, &last_to, prev);
    if (rc && rc != PT_ENOTFOUND)
        return rc;
    cJSON *report = cJSON_CreateObject();
    if (!report)
        return PT_ENOMEM;
    /* z: the number the next close gives these totals. */
    rc = cJSON_AddNumberToObject(report, "z", (double)(last + 1)) ? PT_OK : PT_ENOMEM;
    if (rc == PT_OK)
        rc = report_body(st, lane, 0, &last_to, now > last_to ? now : last_to, report);
    if (rc == PT_OK && (rc = pt_store_z_last(st, &again, &again_to, prev)) == PT_ENOTFOUND)
        rc = PT_OK;
    *moved = rc == PT_OK && again != last;
    if (rc == PT_OK && !*moved)
        rc = finish(report, json);
    cJSON_Delete(report);
    return rc;
}

int pt_report_x(struct pt_store *st, const char *lane, int64_t now, char **json)
{
    /* An X report's reads are not one snapshot: a close between them is
     * seen by the last number changing, and the report read again. */
    *json = NULL;
    for (int tries = 0;; tries++) {
        int moved = 0;
        int rc = x_once(st, lane, now, json, &moved);
        if (rc || !moved)
            return rc;
        if (tries == 4)
            return PT_EBUSY; /* closes one after the other: ask again */
    }
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
    int64_t from = last_to;
    if (!cJSON_AddNumberToObject(report, "z", (double)*z) ||
        !cJSON_AddStringToObject(report, "prev_hash", prev)) {
        cJSON_Delete(report);
        return PT_ENOMEM;
    }
    rc = report_body(st, lane, *z, &from, to, report);
    char *unhashed = NULL, hex[65];
    unsigned char md[32];
    if (rc == PT_OK)
        rc = finish(report, &unhashed);
    if (rc == PT_OK && (rc = pt_sha256(unhashed, strlen(unhashed), md)) == PT_OK) {
        pt_hex_encode(md, sizeof md, hex);
        rc = cJSON_AddStringToObject(report, "hash", hex) ? finish(report, json) : PT_ENOMEM;
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
