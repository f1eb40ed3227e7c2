/*
 * fuzz_json.c - the strict JSON check that every API body and configuration
 * file passes before cJSON.  Whatever it accepts cJSON parses, and the
 * canonical text of it passes the check again; whatever it refuses comes
 * with a report that is valid UTF-8 (it goes into an error message).
 */
#include "err.h"
#include "json.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void accepted(const char *text, size_t size, const struct pt_json_check *chk)
{
    for (size_t i = 0; i < chk->n_members; i++) {
        const struct pt_json_member *m = &chk->members[i];
        if (m->text && (m->text < text || m->text + m->len > text + size))
            abort(); /* a span outside the text */
        int64_t v;
        if (m->text)
            pt_json_plain_int(m->text, m->len, 1, INT64_MAX, &v);
    }
    cJSON *j = cJSON_ParseWithLength(text, size);
    if (!j)
        abort(); /* accepted what cJSON cannot read */
    char *canon = pt_json_canonical(j);
    if (chk->exact_numbers && !canon)
        abort();
    if (canon) {
        struct pt_json_check again = {0};
        if (pt_json_check(canon, strlen(canon), &again) != PT_OK)
            abort(); /* the canonical form of a good text is a good text */
        free(canon);
    }
    cJSON_Delete(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly size bytes, so ASan sees any read past the end. */
    char *text = malloc(size ? size : 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    struct pt_json_member m[2] = {{.name = "amount"}, {.name = "metadata"}};
    struct pt_json_check chk = {.members = m, .n_members = 2, .integers_only = size % 2};
    int rc = pt_json_check(text, size, &chk);
    if (rc == PT_OK) {
        accepted(text, size, &chk);
    } else if (rc == PT_EPARSE) {
        if (!chk.problem[0] || pt_json_utf8_scrub(chk.field) || pt_json_utf8_scrub(chk.problem))
            abort(); /* no reason given, or one that is not valid UTF-8 */
    }
    free(text);
    return 0;
}
