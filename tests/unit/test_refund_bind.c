/*
 * test_refund_bind.c - binding a keyless gateway's refund list to the local
 * refunds of a charge (core/refund_bind.h), table-driven: each case is the
 * local refunds, the gateway's list and the verdict for the refund in
 * question.  This is the decision that keeps a 2C2P refund from being sent
 * twice: a refund the list already shows is bound, never sent again, and a
 * list that does not add up stops everything for an operator.
 */
#include "testutil.h"

#include "refund_bind.h"

#include <stdio.h>
#include <string.h>

/* A local refund: id, state, amount, gateway number ("" none), sent. */
struct loc {
    int id;
    enum pt_state state;
    int64_t amount;
    const char *no;
    int sent;
};
/* A listed refund: amount, status, number. */
struct ent {
    int64_t amount;
    enum pt_outcome status;
    const char *no;
};

#define MAXL 6
struct bind_case {
    const char *name;
    struct loc local[MAXL]; /* local[0] is the refund in question */
    struct ent list[MAXL];
    enum pt_bind want;
    int entry; /* FOUND: the entry */
};

#define S PT_STATE_SUCCESS
#define F PT_STATE_FAILED
#define U PT_STATE_UNKNOWN
#define P PT_STATE_PENDING
#define I PT_STATE_INIT
#define RF PT_OUTCOME_SUCCESS
#define RP PT_OUTCOME_PENDING
#define RFF PT_OUTCOME_DECLINED
#define NONE PT_BIND_NONE
#define FOUND PT_BIND_FOUND
#define UNEXPLAINED PT_BIND_UNEXPLAINED

static const struct bind_case cases[] = {
    {"nothing listed: never executed, may be sent", {{1, I, 2500, "", 0}}, {{0}}, NONE, -1},
    {"the lost answer: one entry of its amount is it",
     {{1, U, 2500, "", 1}},
     {{2500, RF, "3598743"}},
     FOUND,
     0},
    {"a pending one listed as pending", {{1, U, 2500, "", 1}}, {{2500, RP, "77"}}, FOUND, 0},
    {"a refused one listed as refused", {{1, U, 2500, "", 1}}, {{2500, RFF, "78"}}, FOUND, 0},
    {"an entry of another amount: unexplained",
     {{1, I, 3000, "", 0}},
     {{2500, RF, "3598743"}},
     UNEXPLAINED,
     -1},
    {"two entries for one refund: unexplained",
     {{1, U, 2500, "", 1}},
     {{2500, RF, "1"}, {2500, RF, "2"}},
     UNEXPLAINED,
     -1},
    {"the others explained by their numbers, the one left is it",
     {{3, U, 1000, "", 1}, {1, S, 2500, "1", 1}, {2, P, 500, "2", 1}},
     {{2500, RF, "1"}, {500, RP, "2"}, {1000, RF, "3"}},
     FOUND,
     2},
    {"the others explained, nothing left: send",
     {{3, I, 1000, "", 0}, {1, S, 2500, "1", 1}, {2, S, 1000, "2", 1}},
     {{2500, RF, "1"}, {1000, RF, "2"}},
     NONE,
     -1},
    {"a refund we know went back is missing from the list",
     {{2, I, 1000, "", 0}, {1, S, 2500, "1", 1}},
     {{0}},
     UNEXPLAINED,
     -1},
    {"a failed one need not be listed",
     {{2, I, 1000, "", 0}, {1, F, 2500, "1", 1}},
     {{0}},
     NONE,
     -1},
    {"a refusal listed anyway is explained by the failed refund of its amount",
     {{2, I, 500, "", 0}, {1, F, 500, "", 1}},
     {{500, RFF, "9"}},
     NONE,
     -1},
    {"a success is never explained by a failed refund",
     {{2, I, 500, "", 0}, {1, F, 500, "", 1}},
     {{500, RF, "9"}},
     FOUND,
     0},
    {"a failed refund never sent explains nothing",
     {{2, U, 500, "", 1}, {1, F, 500, "", 0}},
     {{500, RFF, "9"}},
     FOUND,
     0},
    {"bound already: its own entry decides", {{1, P, 2500, "5", 1}}, {{2500, RF, "5"}}, FOUND, 0},
    {"bound already and gone from the list",
     {{1, P, 2500, "5", 1}},
     {{2500, RF, "6"}},
     UNEXPLAINED,
     -1},
    {"another refund of the charge in flight",
     {{2, I, 500, "", 0}, {1, U, 700, "", 1}},
     {{0}},
     UNEXPLAINED,
     -1},
    {"another one sent and succeeded without a number",
     {{2, I, 500, "", 0}, {1, S, 700, "", 1}},
     {{700, RF, "1"}},
     UNEXPLAINED,
     -1},
    {"queued siblings never sent count for nothing",
     {{1, U, 500, "", 1}, {2, I, 500, "", 0}, {3, I, 500, "", 0}},
     {{500, RF, "1"}},
     FOUND,
     0},
    {"a refund made outside payterm of the same amount is taken as this one",
     {{1, I, 800, "", 0}},
     {{800, RF, "portal"}},
     FOUND,
     0},
};

static int count_list(const struct ent *e)
{
    int n = 0;
    while (n < MAXL && e[n].no)
        n++;
    return n;
}

static void test_table(void **state)
{
    (void)state;
    int ran = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const struct bind_case *k = &cases[c];
        struct pt_refund local[MAXL];
        int n = 0;
        memset(local, 0, sizeof local);
        for (; n < MAXL && k->local[n].id; n++) {
            local[n].id = k->local[n].id;
            local[n].state = k->local[n].state;
            local[n].amount = k->local[n].amount;
            local[n].first_sent_at = k->local[n].sent ? 1700000000000 : 0;
            snprintf(local[n].gateway_refund_no, sizeof local[n].gateway_refund_no, "%s",
                     k->local[n].no);
            snprintf(local[n].refund_id, sizeof local[n].refund_id, "R-%d", k->local[n].id);
        }
        struct pt_gw_refund_list list;
        memset(&list, 0, sizeof list);
        list.res.outcome = PT_OUTCOME_SUCCESS;
        list.n = count_list(k->list);
        for (int i = 0; i < list.n; i++) {
            list.e[i].amount = k->list[i].amount;
            list.e[i].status = k->list[i].status;
            snprintf(list.e[i].refund_no, sizeof list.e[i].refund_no, "%s", k->list[i].no);
        }
        struct pt_bind_result res;
        pt_refund_bind(&local[0], local, n, &list, &res);
        if (res.verdict != k->want || (k->want == FOUND && res.entry != k->entry))
            fail_msg("%s: verdict %d entry %d (%s), want %d entry %d", k->name, res.verdict,
                     res.entry, res.why, k->want, k->entry);
        if (res.verdict == UNEXPLAINED && !res.why[0])
            fail_msg("%s: unexplained without saying why", k->name);
        ran++;
    }
    assert_int_equal(ran, 19);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
