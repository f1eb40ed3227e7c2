/*
 * test_api_routes.c - the API's route table (firmware/api_routes.c) and its
 * description (firmware/openapi.json) name the same routes: every method
 * and path of one is in the other.  A route's "{gateway}" segment stands
 * for the routes the gateways' tables name (/notify/alipay ...), on both
 * sides, so a path the description writes out (/webhooks/stripe) and one it
 * writes as a template (/notify/{gateway}) are compared alike.
 */
#include "api.h"
#include "gateway.h"
#include "testutil.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_ROUTES 128

struct set {
    char item[MAX_ROUTES][96];
    int n;
};

static void add(struct set *s, const char *method, const char *path)
{
    char m[8];
    snprintf(m, sizeof m, "%s", method);
    for (char *p = m; *p; p++)
        *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
    char it[96];
    snprintf(it, sizeof it, "%s %s", m, path);
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->item[i], it) == 0)
            return;
    assert_true(s->n < MAX_ROUTES);
    snprintf(s->item[s->n++], sizeof s->item[0], "%s", it);
}

/* A path with "{gateway}" becomes each gateway route it stands for. */
static void add_expanded(struct set *s, const char *method, const char *path)
{
    const char *g = strstr(path, "{gateway}");
    if (!g) {
        add(s, method, path);
        return;
    }
    size_t head = (size_t)(g - path);
    int found = 0;
    for (int i = 0; i < pt_gateway_count(); i++) {
        const char *route = pt_gateway_at(i)->notify_route;
        if (route && strncmp(route, path, head) == 0) {
            add(s, method, route);
            found = 1;
        }
    }
    if (!found)
        add(s, method, path); /* no gateway has it: compared as written */
}

static int has(const struct set *s, const char *it)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->item[i], it) == 0)
            return 1;
    return 0;
}

static void test_openapi_names_the_route_table(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/../../firmware/openapi.json", PT_TEST_UNIT_DIR);
    size_t len = 0;
    char *text = pt_test_read_file(path, &len);
    assert_non_null(text);
    cJSON *doc = cJSON_ParseWithLength(text, len);
    free(text);
    assert_non_null(doc);
    static struct set table, described;
    memset(&table, 0, sizeof table);
    memset(&described, 0, sizeof described);
    for (int i = 0; i < pt_api_route_count(); i++) {
        const char *m, *p;
        pt_api_route_at(i, &m, &p);
        add_expanded(&table, m, p);
    }
    const cJSON *paths = cJSON_GetObjectItemCaseSensitive(doc, "paths");
    assert_non_null(paths);
    for (const cJSON *p = paths->child; p; p = p->next)
        for (const cJSON *op = p->child; op; op = op->next)
            if (strcmp(op->string, "parameters") != 0 && strcmp(op->string, "options") != 0)
                add_expanded(&described, op->string, p->string);
    cJSON_Delete(doc);
    int missing = 0;
    for (int i = 0; i < table.n; i++)
        if (!has(&described, table.item[i])) {
            print_error("route %s is not in openapi.json\n", table.item[i]);
            missing++;
        }
    for (int i = 0; i < described.n; i++)
        if (!has(&table, described.item[i])) {
            print_error("openapi.json describes %s, which no route serves\n", described.item[i]);
            missing++;
        }
    assert_int_equal(missing, 0);
    /* Not vacuous: the table has every route the API had when this test
     * was written (19 operations; /notify/{gateway} counts each gateway). */
    assert_true(table.n >= 19);
    assert_int_equal(table.n, described.n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openapi_names_the_route_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
