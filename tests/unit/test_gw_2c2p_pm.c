/*
 * test_gw_2c2p_pm.c - 2C2P refunds through the Payment Maintenance API
 * (core/gateways/2c2p_pm.h) against tests/vectors/2c2p_pm.json: the R, RS
 * and I requests are the XML 2C2P documents, sealed byte for byte as the
 * npm `jose` library opened them; each of 2C2P's answers (sealed by
 * `jose`) is classified as SPEC 5a maps it, every defensive reading
 * included; the pm_ configuration keys load together or not at all, and a
 * key that cannot do its part is refused by name.
 */
#include "testutil.h"

#include "charge.h"
#include "crypto.h"
#include "detrand.h"
#include "err.h"
#include "gateway.h"
#include "gateways/2c2p.h"
#include "gateways/2c2p_pm.h"
#include "gateways/jose.h"
#include "refund.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENDPOINT "https://demo2.2c2p.com/2C2PFrontend/PaymentAction/2.0/action"

struct fixture {
    cJSON *v;
    struct pt_gw_config cfg;
    struct pt_charge c;
    struct pt_refund r;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    f->v = pt_test_vectors("2c2p_pm.json");
    strcpy(f->cfg.name, "2c2p");
    strcpy(f->cfg.merchant_id, "JT01");
    strcpy(f->cfg.refund_endpoint, ENDPOINT);
    f->cfg.private_key = pt_test_key("c2p_merchant_private.pem");
    f->cfg.peer_key = pt_test_key("c2p_gateway_cert.cer");
    const cJSON *ch = cJSON_GetObjectItem(f->v, "charge");
    strcpy(f->c.gateway, "2c2p");
    snprintf(f->c.order_id, sizeof f->c.order_id, "%s", pt_test_str(ch, "order_id"));
    snprintf(f->c.currency, sizeof f->c.currency, "%s", pt_test_str(ch, "currency"));
    f->c.amount = pt_test_int(ch, "amount");
    f->c.state = PT_STATE_SUCCESS;
    snprintf(f->r.refund_id, sizeof f->r.refund_id, "R-1");
    f->r.amount = pt_test_int(ch, "refund");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    pt_gw_config_free(&f->cfg);
    cJSON_Delete(f->v);
    free(f);
    return 0;
}

/* The body as 2C2P receives it, opened the way 2C2P opens it. */
static char *opened_by_2c2p(const char *body, size_t len)
{
    struct pt_pk *mpub = pt_test_key("c2p_merchant_public.pem");
    struct pt_pk *gkey = pt_test_key("c2p_gateway_private.pem");
    char *xml = NULL;
    assert_int_equal(pt_jose_open(mpub, gkey, body, len, &xml, NULL), PT_OK);
    pt_pk_free(mpub);
    pt_pk_free(gkey);
    return xml;
}

static void test_requests(void **state)
{
    struct fixture *f = *state;
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "2c2p_pm.json", "requests"))
    {
        const char *pt = pt_test_str(c, "process_type");
        char *xml = NULL;
        int64_t amount = strcmp(pt, "R") == 0 ? f->r.amount : f->c.amount;
        assert_int_equal(pt_2c2p_pm_request(&f->cfg, pt, &f->c, amount, &xml, NULL), PT_OK);
        assert_string_equal(xml, pt_test_str(c, "xml"));
        assert_string_equal(pt_test_str(c, "jose_xml"), xml);
        free(xml);
        if (strcmp(pt, "I") == 0) {
            n++;
            continue; /* not a refund call: the adapter's table does not send it */
        }
        struct pt_detrand d;
        pt_detrand_init(&d, pt_test_str(c, "seed"));
        struct pt_gw_env env = {.random = pt_detrand_fn, .random_ctx = &d};
        struct pt_http_request req;
        enum pt_gw_refund_op op = strcmp(pt, "R") == 0 ? PT_GW_REFUND : PT_GW_REFUND_QUERY;
        assert_int_equal(pt_gateway_2c2p.build_refund(&f->cfg, op, &f->c, &f->r, &env, &req),
                         PT_OK);
        assert_string_equal(req.method, "POST");
        assert_string_equal(req.url, ENDPOINT);
        assert_string_equal(req.headers[0], "Content-Type: text/plain");
        /* The very bytes `jose` opened, and 2C2P's side reads the XML. */
        assert_string_equal(req.body, pt_test_str(c, "body"));
        char *back = opened_by_2c2p(req.body, req.body_len);
        assert_string_equal(back, pt_test_str(c, "xml"));
        free(back);
        pt_http_request_free(&req);
        n++;
    }
    assert_int_equal(n, 3);
}

static void test_request_refusals(void **state)
{
    struct fixture *f = *state;
    struct pt_http_request req;
    struct pt_gw_config bare = {0};
    strcpy(bare.name, "2c2p");
    strcpy(bare.merchant_id, "JT01");
    strcpy(bare.refund_endpoint, ENDPOINT);
    /* No Payment Maintenance keys: nothing is built. */
    assert_int_equal(pt_gateway_2c2p.build_refund(&bare, PT_GW_REFUND, &f->c, &f->r, NULL, &req),
                     PT_EINVAL);
    /* An invoice 2C2P does not take, an amount that cannot be written. */
    struct pt_charge c = f->c;
    memset(c.order_id, 'x', 51);
    c.order_id[51] = '\0';
    assert_int_equal(pt_gateway_2c2p.build_refund(&f->cfg, PT_GW_REFUND, &c, &f->r, NULL, &req),
                     PT_EINVAL);
    struct pt_refund r = f->r;
    r.amount = 0;
    assert_int_equal(pt_gateway_2c2p.build_refund(&f->cfg, PT_GW_REFUND, &f->c, &r, NULL, &req),
                     PT_EINVAL);
    /* JPY and KWD are written with their own decimals. */
    char *xml = NULL;
    strcpy(c.order_id, "INV-JPY");
    strcpy(c.currency, "JPY");
    assert_int_equal(pt_2c2p_pm_request(&f->cfg, "R", &c, 1500, &xml, NULL), PT_OK);
    assert_non_null(strstr(xml, "<actionAmount>1500</actionAmount>"));
    free(xml);
    strcpy(c.currency, "KWD");
    assert_int_equal(pt_2c2p_pm_request(&f->cfg, "R", &c, 1230, &xml, NULL), PT_OK);
    assert_non_null(strstr(xml, "<actionAmount>1.230</actionAmount>"));
    free(xml);
}

static void answer_of(const cJSON *c, struct pt_http_response *resp)
{
    memset(resp, 0, sizeof *resp);
    resp->status = (int)pt_test_int(c, "http_status");
    resp->body = strdup(pt_test_str(c, "body"));
    resp->body_len = strlen(resp->body);
}

/* The fields the vector names, as the adapter decided. */
static void expect_result(const cJSON *c, const struct pt_gw_result *res)
{
    const char *name = pt_test_str(c, "name");
    if (strcmp(pt_outcome_name(res->outcome), pt_test_str(c, "outcome")) != 0)
        fail_msg("%s: outcome %s (%s %s), want %s", name, pt_outcome_name(res->outcome), res->code,
                 res->message, pt_test_str(c, "outcome"));
    if (cJSON_GetObjectItem(c, "code") && strcmp(res->code, pt_test_str(c, "code")) != 0)
        fail_msg("%s: code %s, want %s", name, res->code, pt_test_str(c, "code"));
    if (cJSON_GetObjectItem(c, "trade_no") && strcmp(res->trade_no, pt_test_str(c, "trade_no")))
        fail_msg("%s: refund number '%s', want %s", name, res->trade_no,
                 pt_test_str(c, "trade_no"));
    if (cJSON_GetObjectItem(c, "amount") && res->amount != pt_test_int(c, "amount"))
        fail_msg("%s: amount %lld, want %lld", name, (long long)res->amount,
                 pt_test_int(c, "amount"));
}

static void expect_list(const cJSON *c, const struct pt_gw_refund_list *l)
{
    expect_result(c, &l->res);
    const cJSON *want = cJSON_GetObjectItem(c, "list");
    if (!want) {
        assert_int_equal(l->n, 0);
        return;
    }
    assert_int_equal(l->n, cJSON_GetArraySize(want));
    for (int i = 0; i < l->n; i++) {
        const cJSON *e = cJSON_GetArrayItem(want, i);
        assert_int_equal(l->e[i].amount, cJSON_GetArrayItem(e, 0)->valueint);
        assert_string_equal(pt_outcome_name(l->e[i].status), cJSON_GetArrayItem(e, 1)->valuestring);
        assert_string_equal(l->e[i].refund_no, cJSON_GetArrayItem(e, 2)->valuestring);
    }
}

static void test_answers(void **state)
{
    struct fixture *f = *state;
    const cJSON *c;
    int n = 0;
    struct pt_gw_refund_list *list = malloc(sizeof *list);
    cJSON_ArrayForEach(c, pt_test_cases(f->v, "2c2p_pm.json", "answers"))
    {
        struct pt_http_response resp;
        struct pt_gw_result res;
        const char *op = pt_test_str(c, "op");
        answer_of(c, &resp);
        if (strcmp(op, "R") == 0) {
            assert_int_equal(
                pt_gateway_2c2p.parse_refund(&f->cfg, PT_GW_REFUND, &f->c, &f->r, &resp, &res),
                PT_OK);
            expect_result(c, &res);
        } else if (strcmp(op, "RS") == 0) {
            assert_int_equal(pt_gateway_2c2p.parse_refund_list(&f->cfg, &f->c, &resp, list), PT_OK);
            expect_list(c, list);
        } else {
            assert_int_equal(pt_2c2p_pm_parse_inquiry(&f->cfg, &f->c, &resp, &res), PT_OK);
            expect_result(c, &res);
        }
        pt_http_response_free(&resp);
        n++;
    }
    free(list);
    assert_int_equal(n, 47);
}

/* Keys the other way round: the merchant cannot read its own requests, and
 * an answer is never read with the merchant's own public key. */
static void test_answers_need_the_right_keys(void **state)
{
    struct fixture *f = *state;
    const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(f->v, "answers"), 0);
    struct pt_http_response resp;
    struct pt_gw_result res;
    struct pt_gw_config cfg = {0};
    strcpy(cfg.merchant_id, "JT01");
    cfg.private_key = pt_test_key("c2p_merchant_private.pem");
    cfg.peer_key = pt_test_key("c2p_merchant_public.pem");
    answer_of(c, &resp);
    assert_int_equal(pt_gateway_2c2p.parse_refund(&cfg, PT_GW_REFUND, &f->c, &f->r, &resp, &res),
                     PT_OK);
    assert_int_equal(res.outcome, PT_OUTCOME_AMBIGUOUS);
    assert_string_equal(res.code, "invalid_signature");
    pt_http_response_free(&resp);
    pt_gw_config_free(&cfg);
}

/* ---- configuration ---------------------------------------------------------------- */

struct keys_dir {
    char dir[256], secret[400], merchant[400], merchant_pub[400], cer[400], gateway_key[400];
};

static void key_copy(const char *name, const char *dst)
{
    char src[1024];
    size_t len = 0;
    pt_test_data_path(name, src, sizeof src);
    char *text = pt_test_read_file(src, &len);
    FILE *f = fopen(dst, "wb");
    assert_non_null(text);
    assert_non_null(f);
    fwrite(text, 1, len, f);
    fclose(f);
    free(text);
}

static void keys_dir(struct keys_dir *k)
{
    pt_test_tmpdir(k->dir, sizeof k->dir);
    snprintf(k->secret, sizeof k->secret, "%s/secret", k->dir);
    snprintf(k->merchant, sizeof k->merchant, "%s/merchant.pem", k->dir);
    snprintf(k->merchant_pub, sizeof k->merchant_pub, "%s/merchant_pub.pem", k->dir);
    snprintf(k->cer, sizeof k->cer, "%s/2c2p.cer", k->dir);
    snprintf(k->gateway_key, sizeof k->gateway_key, "%s/gateway.pem", k->dir);
    pt_test_write_file(k->secret, "ABCDEF0123456789\n", 0600);
    key_copy("keys/c2p_merchant_private.pem", k->merchant);
    key_copy("keys/c2p_merchant_public.pem", k->merchant_pub);
    key_copy("keys/c2p_gateway_cert.cer", k->cer);
    key_copy("keys/c2p_gateway_private.pem", k->gateway_key);
}

static int load(const char *endpoint, const char *priv, const char *pub, struct pt_gw_config *o,
                char *err, size_t errlen, const struct keys_dir *k)
{
    struct pt_gw_settings in = {.configured = 1};
    strcpy(in.merchant_id, "JT01");
    snprintf(in.refund_endpoint, sizeof in.refund_endpoint, "%s", endpoint);
    snprintf(in.files[C2P_SECRET], sizeof in.files[0], "%s", k->secret);
    snprintf(in.files[C2P_PM_PRIVATE_KEY], sizeof in.files[0], "%s", priv);
    snprintf(in.files[C2P_PM_PUBLIC_KEY], sizeof in.files[0], "%s", pub);
    memset(o, 0, sizeof *o);
    err[0] = '\0';
    return pt_gateway_2c2p.load(&in, NULL, NULL, o, err, errlen);
}

static void test_config(void **state)
{
    (void)state;
    struct keys_dir k;
    struct pt_gw_config o;
    char err[1024];
    keys_dir(&k);
    /* None: PGW works, refunds are refused naming the three keys. */
    assert_int_equal(load("", "", "", &o, err, sizeof err, &k), PT_OK);
    assert_null(o.private_key);
    struct pt_gw_settings none = {0};
    const char *why = pt_gateway_2c2p.refund_unavailable(&none);
    assert_non_null(why);
    assert_non_null(strstr(why, "gateways.2c2p.pm_endpoint"));
    assert_non_null(strstr(why, "gateways.2c2p.pm_private_key_file"));
    assert_non_null(strstr(why, "gateways.2c2p.pm_public_key_file"));
    pt_gw_config_free(&o);
    /* All three, 2C2P's key as its DER .cer. */
    assert_int_equal(load(ENDPOINT, k.merchant, k.cer, &o, err, sizeof err, &k), PT_OK);
    assert_non_null(o.private_key);
    assert_non_null(o.peer_key);
    assert_string_equal(o.refund_endpoint, ENDPOINT);
    assert_string_equal(o.signing_key, "gateways.2c2p.pm_private_key_file");
    pt_gw_config_free(&o);
    /* Some: refused, naming what is missing. */
    assert_int_equal(load(ENDPOINT, "", "", &o, err, sizeof err, &k), PT_ECONFIG);
    assert_non_null(
        strstr(err, "gateways.2c2p.pm_private_key_file, gateways.2c2p.pm_public_key_file"));
    assert_null(strstr(err, "gateways.2c2p.pm_endpoint,"));
    pt_gw_config_free(&o);
    assert_int_equal(load("", k.merchant, k.cer, &o, err, sizeof err, &k), PT_ECONFIG);
    assert_non_null(strstr(err, "gateways.2c2p.pm_endpoint"));
    pt_gw_config_free(&o);
    /* A public key where the merchant's private key belongs. */
    assert_int_equal(load(ENDPOINT, k.merchant_pub, k.cer, &o, err, sizeof err, &k), PT_EPARSE);
    assert_non_null(strstr(err, "gateways.2c2p.pm_private_key_file"));
    assert_non_null(strstr(err, "not a private key"));
    pt_gw_config_free(&o);
    /* A private key where 2C2P's public key belongs. */
    assert_int_equal(load(ENDPOINT, k.merchant, k.gateway_key, &o, err, sizeof err, &k), PT_EPARSE);
    assert_non_null(strstr(err, "gateways.2c2p.pm_public_key_file"));
    pt_gw_config_free(&o);
    /* The merchant's own public half where 2C2P's key belongs. */
    assert_int_equal(load(ENDPOINT, k.merchant, k.merchant_pub, &o, err, sizeof err, &k),
                     PT_EPARSE);
    assert_non_null(strstr(err, "public half of gateways.2c2p.pm_private_key_file"));
    pt_gw_config_free(&o);
    pt_test_rmtree(k.dir);
}

/* The adapter's table says what the sync engine must do for it. */
static void test_table(void **state)
{
    (void)state;
    assert_true(pt_gateway_2c2p.refund_keyless);
    assert_non_null(pt_gateway_2c2p.build_refund);
    assert_non_null(pt_gateway_2c2p.parse_refund);
    assert_non_null(pt_gateway_2c2p.parse_refund_list);
    assert_non_null(pt_gateway_2c2p.refund_unavailable);
    assert_int_equal(pt_2c2p_pm_refund_status("RF"), PT_OUTCOME_SUCCESS);
    assert_int_equal(pt_2c2p_pm_refund_status("RS"), PT_OUTCOME_AMBIGUOUS);
    assert_int_equal(pt_2c2p_pm_refund_status(NULL), PT_OUTCOME_AMBIGUOUS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answers_need_the_right_keys, setup, teardown),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
