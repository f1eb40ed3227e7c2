/*
 * test_config.c - the configuration loader: defaults, merging, relative
 * paths, and errors that name the key.
 */
#include "testutil.h"

#include "config_load.h"
#include "err.h"
#include "store.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static int setup(void **state)
{
    (void)state;
    pt_test_tmpdir(dir, sizeof dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pt_test_rmtree(dir);
    return 0;
}

static int load_text(const char *text, struct pt_config *cfg, char *err, size_t errlen)
{
    char path[300];
    snprintf(path, sizeof path, "%s/c.json", dir);
    pt_test_write_file(path, text, 0644);
    const char *paths[] = {path};
    return pt_config_load(paths, 1, cfg, err, errlen);
}

static void test_defaults(void **state)
{
    (void)state;
    struct pt_config cfg;
    char err[512];
    assert_int_equal(pt_config_load(NULL, 0, &cfg, err, sizeof err), PT_OK);
    assert_string_equal(cfg.listen, "127.0.0.1:8080");
    assert_string_equal(cfg.data_dir, "/var/lib/payterm");
    assert_int_equal(cfg.idem_ttl_s, 86400);
    assert_int_equal(cfg.idem_lock_timeout_s, 60);
    assert_int_equal(cfg.sync_max_attempts, 3);
    assert_int_equal(cfg.synchronous_normal, 0);
    assert_int_equal(cfg.wal_vfs_off, 0);
    assert_int_equal(pt_config_offline_max_age(&cfg, "alipay", "barcode"), 60);
    assert_null(pt_config_offline_limit(&cfg, "CNY")); /* offline is opt-in per currency */
    assert_false(pt_config_gateway_configured(&cfg, "alipay"));
    assert_int_equal(cfg.qr_timeout_s, 300);
}

static void test_full_example(void **state)
{
    (void)state;
    struct pt_config cfg;
    char err[512];
    const char *text =
        "{\"data_dir\":\"data\",\"listen\":\"0.0.0.0:9000\",\"notify_listen\":null,"
        "\"log_level\":\"debug\",\"idempotency\":{\"ttl_s\":3600,\"lock_timeout_s\":30},"
        "\"limits\":{\"max_amount\":500000},"
        "\"offline\":{\"limits\":{\"CNY\":{\"max_amount\":50000,\"max_total\":500000}},"
        "\"max_count\":10,\"max_age_s\":{\"alipay.barcode\":45}},"
        "\"sync\":{\"interval_s\":2,\"max_attempts\":5},"
        "\"storage\":{\"synchronous\":\"NORMAL\",\"wal_vfs\":false},\"qr_timeout_s\":120,"
        "\"gateways\":{\"stripe\":{\"endpoint\":\"https://127.0.0.1:8443\","
        "\"secret_key_file\":\"keys/sk\"}}}";
    assert_int_equal(load_text(text, &cfg, err, sizeof err), PT_OK);
    char want[400];
    snprintf(want, sizeof want, "%s/data", dir);
    assert_string_equal(cfg.data_dir, want); /* relative to the file's directory */
    snprintf(want, sizeof want, "%s/keys/sk", dir);
    assert_string_equal(cfg.gw[pt_gateway_index("stripe")].files[0], want);
    assert_true(cfg.gw[pt_gateway_index("stripe")].configured);
    assert_int_equal(cfg.log_level, PT_LOG_DEBUG);
    assert_int_equal(cfg.max_amount, 500000);
    assert_int_equal(cfg.offline_max_count, 10);
    assert_int_equal(pt_config_offline_limit(&cfg, "CNY")->max_total, 500000);
    assert_int_equal(pt_config_offline_max_age(&cfg, "alipay", "barcode"), 45);
    assert_int_equal(pt_config_offline_max_age(&cfg, "stripe", "card_on_file"), 82800);
    assert_int_equal(cfg.sync_max_attempts, 5);
    assert_true(cfg.synchronous_normal);
    assert_true(cfg.wal_vfs_off);
    assert_int_equal(cfg.qr_timeout_s, 120);
}

struct bad_case {
    const char *text;
    const char *must_mention;
};

static void test_errors_name_the_key(void **state)
{
    (void)state;
    static const struct bad_case cases[] = {
        {"{\"lissten\":\"1.2.3.4:5\"}", "'lissten'"},
        {"{\"listen\":\"nohost\"}", "'listen'"},
        {"{\"listen\":\"127.0.0.1:99999\"}", "'listen'"},
        {"{\"log_level\":\"loud\"}", "'log_level'"},
        {"{\"idempotency\":{\"ttl_s\":\"long\"}}", "'idempotency.ttl_s'"},
        {"{\"idempotency\":{\"ttl\":5}}", "'idempotency.ttl'"},
        {"{\"limits\":{\"max_amount\":0}}", "'limits.max_amount'"},
        {"{\"limits\":{\"max_amount\":1.5}}", "'limits.max_amount'"},
        {"{\"offline\":{\"limits\":{\"cny\":{\"max_amount\":1,\"max_total\":2}}}}",
         "'offline.limits.cny'"},
        {"{\"offline\":{\"limits\":{\"CNY\":{\"max_amount\":1}}}}", "'offline.limits.CNY'"},
        {"{\"offline\":{\"limits\":{\"CNY\":{\"max_amount\":-1,\"max_total\":2}}}}",
         "'offline.limits.CNY.max_amount'"},
        {"{\"offline\":{\"max_age_s\":{\"paypal.card\":5}}}", "'offline.max_age_s.paypal.card'"},
        {"{\"sync\":{\"backoff_base_ms\":1000,\"backoff_max_ms\":10}}", "'sync.backoff_max_ms'"},
        {"{\"storage\":{\"synchronous\":\"OFF\"}}", "'storage.synchronous'"},
        {"{\"storage\":{\"wal_vfs\":\"no\"}}", "'storage.wal_vfs'"},
        {"{\"gateways\":{\"paypal\":{}}}", "'gateways.paypal'"},
        /* QR codes expire (SPEC 18): a minute to a day. */
        {"{\"qr_timeout_s\":59}", "'qr_timeout_s': must be between 60 and 86400 (got 59)"},
        {"{\"qr_timeout_s\":86401}", "'qr_timeout_s': must be between 60 and 86400 (got 86401)"},
        {"{\"qr_timeout_s\":\"5m\"}", "'qr_timeout_s': must be an integer between 60 and 86400"},
        /* 2C2P's zone-less times (paymentExpiry, SPEC 18). */
        {"{\"gateways\":{\"2c2p\":{\"merchant_id\":\"JT01\",\"secret_key_file\":\"s\","
         "\"utc_offset\":\"+7\"}}}",
         "'gateways.2c2p.utc_offset': must be a UTC offset"},
        {"{\"gateways\":{\"2c2p\":{\"merchant_id\":\"JT01\",\"secret_key_file\":\"s\","
         "\"utc_offset\":\"+14:30\"}}}",
         "'gateways.2c2p.utc_offset'"},
        {"{\"gateways\":{\"2c2p\":{\"merchant_id\":\"JT01\",\"secret_key_file\":\"s\","
         "\"utc_offset\":420}}}",
         "'gateways.2c2p.utc_offset'"},
        {"{\"gateways\":{\"alipay\":{\"app_id\":\"a\",\"private_key_file\":\"k\","
         "\"alipay_public_key_file\":\"p\",\"utc_offset\":\"+08:00\"}}}",
         "'gateways.alipay.utc_offset': unknown key"},
        /* The store server (SPEC 16). */
        {"{\"store\":{\"backend\":\"mysql\"}}", "'store.backend'"},
        {"{\"store\":{\"backend\":\"postgresql\",\"lane_id\":\"l1\"}}", "'store.dsn'"},
        {"{\"store\":{\"backend\":\"postgresql\",\"dsn\":\"host=db\",\"lane_id\":\"l1\"}}",
         "'store.dsn': must be a postgresql:// URI"},
        {"{\"store\":{\"backend\":\"postgresql\",\"dsn\":\"postgresql://u:secret@db/p\","
         "\"lane_id\":\"l1\"}}",
         "'store.dsn': holds a password"},
        {"{\"store\":{\"backend\":\"postgresql\",\"dsn\":\"postgresql://u@db/p?password=x\","
         "\"lane_id\":\"l1\"}}",
         "'store.dsn': holds a password"},
        {"{\"store\":{\"backend\":\"postgresql\",\"dsn\":\"postgresql://u@db/p\"}}",
         "'store.lane_id': required"},
        {"{\"store\":{\"backend\":\"postgresql\",\"dsn\":\"postgresql://u@db/p\","
         "\"lane_id\":\"lane 1\"}}",
         "'store.lane_id'"},
        {"{\"store\":{\"backend\":\"postgresql\",\"dsn\":\"postgresql://u@db/p\","
         "\"lane_id\":\"l1\",\"fallback\":\"disk\"}}",
         "'store.fallback'"},
        {"{\"store\":{\"fallback\":\"local\"}}", "'store.fallback': only with"},
        {"{\"store\":{\"dsn\":\"postgresql://db/p\"}}", "'store.dsn': only with"},
        {"{\"store\":{\"backend\":\"postgresql\",\"dsn\":\"postgresql://u@db/p\","
         "\"lane_id\":\"l1\",\"pool\":4}}",
         "'store.pool'"},
        {"{\"gateways\":{\"alipay\":{\"app_id\":\"x\"}}}", "'gateways.alipay.private_key_file'"},
        {"{\"gateways\":{\"stripe\":{\"secret_key_file\":\"k\",\"endpoint\":\"http://x\"}}}",
         "'gateways.stripe.endpoint'"},
        {"{\"data_dir\":\"a\",\"data_dir\":\"b\"}", "'data_dir'"},
        {"[1,2]", "JSON object"},
        {"{\"data_dir\":", "not valid JSON"},
        /* A hostile file: text with more than one meaning, or none. */
        {"{\"data_dir\":\"/var/lib/a\\u0000/tmp\"}", "'data_dir': contains U+0000"},
        {"{\"data_dir\":\"/var/lib/caf\xc3(\"}", "'data_dir': is not valid UTF-8"},
        {"{\"sync\":{\"interval_s\":1,\"interval\\u005fs\":2}}", "'sync.interval_s': given twice"},
        {"{\"sync\":{\"interval_s\":0012}}", "'sync.interval_s'"},
        {"{\"sync\":{\"interval_s\":1e1}}", "'sync.interval_s'"},
        {"{\"sync\":{\"interval_s\":10.0}}", "'sync.interval_s'"},
        {"{\"sync\":{\"interval_s\":1}} {}", "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct pt_config cfg;
        char err[512] = "";
        int rc = load_text(cases[i].text, &cfg, err, sizeof err);
        if (rc == PT_OK)
            fail_msg("accepted bad config %s", cases[i].text);
        if (!strstr(err, cases[i].must_mention))
            fail_msg("error for %s is \"%s\", should mention %s", cases[i].text, err,
                     cases[i].must_mention);
        assert_non_null(strstr(err, "c.json"));
    }
    /* A UTF-8 byte order mark, as some editors write it, is not an error. */
    struct pt_config cfg;
    char err[512] = "";
    assert_int_equal(load_text("{\"store\":{\"backend\":\"postgresql\",\"dsn\":"
                               "\"postgresql://payterm@db.shop.lan/payterm\",\"lane_id\":"
                               "\"lane-3\",\"fallback\":\"local\"}}",
                               &cfg, err, sizeof err),
                     PT_OK);
    assert_true(cfg.store_postgresql);
    assert_true(cfg.store_fallback_local);
    assert_string_equal(cfg.lane_id, "lane-3");
    assert_int_equal(load_text("\xef\xbb\xbf{\"log_level\":\"debug\"}", &cfg, err, sizeof err),
                     PT_OK);
    /* The ends of qr_timeout_s's range. */
    assert_int_equal(load_text("{\"qr_timeout_s\":60}", &cfg, err, sizeof err), PT_OK);
    assert_int_equal(cfg.qr_timeout_s, 60);
    assert_int_equal(load_text("{\"qr_timeout_s\":86400}", &cfg, err, sizeof err), PT_OK);
    assert_int_equal(cfg.qr_timeout_s, 86400);
    /* A zone west of UTC. */
    assert_int_equal(load_text("{\"gateways\":{\"2c2p\":{\"merchant_id\":\"JT01\","
                               "\"secret_key_file\":\"s\",\"utc_offset\":\"-03:30\"}}}",
                               &cfg, err, sizeof err),
                     PT_OK);
    assert_int_equal(cfg.gw[pt_gateway_index("2c2p")].utc_offset_min, -210);
}

/*
 * A lock that expires while its request still waits for the gateway lets a
 * retry take the key over and answer 202 PROCESSING for a charge that is
 * about to succeed (issue 32, item 7): idempotency.lock_timeout_s must be
 * above sync.request_timeout_ms + 5 s, and the error names both keys with
 * the values they have, the default ones too.
 */
static void test_lock_timeout_above_request_timeout(void **state)
{
    (void)state;
    static const struct {
        const char *text, *lock, *request;
    } bad[] = {
        {"{\"idempotency\":{\"lock_timeout_s\":20}}", "lock_timeout_s': 20 s must be above",
         "sync.request_timeout_ms (15000 ms) + 5 s"},
        {"{\"sync\":{\"request_timeout_ms\":60000}}", "lock_timeout_s': 60 s must be above",
         "sync.request_timeout_ms (60000 ms) + 5 s"},
        {"{\"idempotency\":{\"lock_timeout_s\":6},\"sync\":{\"request_timeout_ms\":1000}}",
         "lock_timeout_s': 6 s must be above", "sync.request_timeout_ms (1000 ms) + 5 s"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct pt_config cfg;
        char err[512] = "";
        if (load_text(bad[i].text, &cfg, err, sizeof err) != PT_ECONFIG)
            fail_msg("accepted %s (%s)", bad[i].text, err);
        if (!strstr(err, "key 'idempotency.lock_timeout_s'") || !strstr(err, bad[i].lock) ||
            !strstr(err, bad[i].request) || !strstr(err, "c.json"))
            fail_msg("error for %s is \"%s\": should name idempotency.lock_timeout_s (%s) and "
                     "sync.request_timeout_ms (%s)",
                     bad[i].text, err, bad[i].lock, bad[i].request);
    }
    struct pt_config cfg;
    char err[512] = "";
    /* Just above: 1 s + 5 s < 7 s; and the defaults (60 s, 15 s). */
    assert_int_equal(load_text("{\"idempotency\":{\"lock_timeout_s\":7},"
                               "\"sync\":{\"request_timeout_ms\":1000}}",
                               &cfg, err, sizeof err),
                     PT_OK);
    assert_int_equal(load_text("{}", &cfg, err, sizeof err), PT_OK);
    /* The rule is the configuration's, whatever file holds which key. */
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/a.json", dir);
    snprintf(b, sizeof b, "%s/b.json", dir);
    pt_test_write_file(a, "{\"idempotency\":{\"lock_timeout_s\":30}}", 0644);
    pt_test_write_file(b, "{\"sync\":{\"request_timeout_ms\":30000}}", 0644);
    const char *paths[] = {a, b};
    assert_int_equal(pt_config_load(paths, 2, &cfg, err, sizeof err), PT_ECONFIG);
    assert_non_null(strstr(err, "a.json + "));
    assert_non_null(strstr(err, "sync.request_timeout_ms (30000 ms)"));
}

static void test_merge_fragments(void **state)
{
    (void)state;
    char base[300], frag_dir[300], frag[300], err[512];
    snprintf(base, sizeof base, "%s/base.json", dir);
    snprintf(frag_dir, sizeof frag_dir, "%s/sim", dir);
    snprintf(frag, sizeof frag, "%s/sim/gateways.json", dir);
    assert_int_equal(mkdir(frag_dir, 0700), 0);
    pt_test_write_file(base,
                       "{\"listen\":\"127.0.0.1:8081\",\"sync\":{\"interval_s\":9},"
                       "\"tls\":{\"ca_file\":\"/etc/ca.pem\"}}",
                       0644);
    pt_test_write_file(frag,
                       "{\"tls\":{\"ca_file\":\"ca.pem\"},\"sync\":{\"max_attempts\":4},"
                       "\"gateways\":{\"2c2p\":{\"endpoint\":\"https://127.0.0.1:8443\","
                       "\"merchant_id\":\"JT01\",\"secret_key_file\":\"2c2p.secret\"}}}",
                       0644);
    const char *paths[] = {base, frag};
    struct pt_config cfg;
    assert_int_equal(pt_config_load(paths, 2, &cfg, err, sizeof err), PT_OK);
    assert_string_equal(cfg.listen, "127.0.0.1:8081");
    assert_int_equal(cfg.sync_interval_s, 9);   /* from base */
    assert_int_equal(cfg.sync_max_attempts, 4); /* from the fragment */
    char want[400];
    snprintf(want, sizeof want, "%s/ca.pem", frag_dir);
    assert_string_equal(cfg.ca_file, want); /* relative to the fragment's dir */
    assert_true(cfg.gw[pt_gateway_index("2c2p")].configured);
    /* 2C2P's zone-less times are Bangkok time unless utc_offset says otherwise. */
    assert_int_equal(cfg.gw[pt_gateway_index("2c2p")].utc_offset_min, 7 * 60);
}

static void test_secret_permissions(void **state)
{
    (void)state;
    char key[300], text[600], err[512];
    snprintf(key, sizeof key, "%s/sk_test", dir);
    pt_test_write_file(key, "sk_test_123", 0644);
    snprintf(text, sizeof text,
             "{\"gateways\":{\"stripe\":{\"endpoint\":\"https://x\",\"secret_key_file\":\"%s\"}}}",
             key);
    struct pt_config cfg;
    assert_int_equal(load_text(text, &cfg, err, sizeof err), PT_OK);
    assert_int_equal(pt_config_check_secrets(&cfg, err, sizeof err), PT_EPERM);
    assert_non_null(strstr(err, key));
    assert_non_null(strstr(err, "chmod 600"));
    assert_non_null(strstr(err, "0644"));
    chmod(key, 0600);
    assert_int_equal(pt_config_check_secrets(&cfg, err, sizeof err), PT_OK);
    chmod(key, 0640);
    assert_int_equal(pt_config_check_secrets(&cfg, err, sizeof err), PT_EPERM);
    unlink(key);
    assert_int_equal(pt_config_check_secrets(&cfg, err, sizeof err), PT_EIO);
    assert_non_null(strstr(err, key));
}

/* One recipe for every thread that opens the lane's store (issue 34): what
 * the daemon, the API's pool and the syncer each used to set by the
 * backend's name, now from the backend's capabilities. */
static void test_lane_store_options(void **state)
{
    (void)state;
    struct pt_config cfg;
    char err[512] = "", db[300];
    struct pt_store_options o;
    /* SQLite: a file in data_dir, one writer; a thread opening it after
     * the daemon must find it (SPEC 18); never connect_later. */
    assert_int_equal(
        load_text("{\"data_dir\":\"data\",\"storage\":{\"wal_vfs\":false}}", &cfg, err, sizeof err),
        PT_OK);
    pt_config_db_path(&cfg, db, sizeof db);
    assert_int_equal(pt_config_store_caps(&cfg),
                     PT_STORE_CAP_DATADIR_FILE | PT_STORE_CAP_GROUP_COMMIT);
    pt_config_lane_store_options(&cfg, db, PT_LANE_OPEN_FIRST, &o);
    assert_string_equal(o.path, db);
    assert_int_equal(o.existing, 0);
    assert_int_equal(o.connect_later, 0);
    assert_int_equal(o.no_wal_vfs, 0); /* the daemon's process-wide switch */
    pt_config_lane_store_options(&cfg, db, PT_LANE_OPEN_LATER, &o);
    assert_int_equal(o.existing, 1);
    /* The store opened says what its options said. */
    struct pt_store *st = NULL;
    pt_config_lane_store_options(&cfg, db, PT_LANE_OPEN_FIRST, &o);
    mkdir(cfg.data_dir, 0700);
    assert_int_equal(pt_store_open(&o, &st, err, sizeof err), PT_OK);
    assert_int_equal(pt_store_caps(st), pt_config_store_caps(&cfg));
    pt_store_close(st);
    struct pt_store *local = (struct pt_store *)&o; /* must be set to NULL */
    assert_int_equal(pt_config_open_local_queue(&cfg, db, &local, err, sizeof err), PT_OK);
    assert_null(local);

    /* PostgreSQL: a server the lanes share; with store.fallback "local" it
     * may be out of reach at open, and the lane queues on its own file. */
    static const char pg[] = "{\"data_dir\":\"data\",\"store\":{\"backend\":\"postgresql\",\"dsn\":"
                             "\"postgresql://payterm@db.shop.lan/payterm\",\"lane_id\":"
                             "\"lane-3\"%s}}";
    char text[512];
    snprintf(text, sizeof text, pg, ",\"fallback\":\"local\"");
    assert_int_equal(load_text(text, &cfg, err, sizeof err), PT_OK);
    assert_int_equal(pt_config_store_caps(&cfg), PT_STORE_CAP_SHARED);
    pt_config_lane_store_options(&cfg, db, PT_LANE_OPEN_LATER, &o);
    assert_string_equal(o.dsn, "postgresql://payterm@db.shop.lan/payterm");
    assert_int_equal(o.existing, 0); /* the server keeps it */
    assert_int_equal(o.connect_later, 1);
    assert_int_equal(pt_config_open_local_queue(&cfg, db, &local, err, sizeof err), PT_OK);
    assert_non_null(local);
    assert_int_equal(pt_store_caps(local), PT_STORE_CAP_DATADIR_FILE | PT_STORE_CAP_GROUP_COMMIT);
    pt_store_close(local);
    snprintf(text, sizeof text, pg, "");
    assert_int_equal(load_text(text, &cfg, err, sizeof err), PT_OK);
    pt_config_lane_store_options(&cfg, db, PT_LANE_OPEN_FIRST, &o);
    assert_int_equal(o.connect_later, 0); /* no queue of its own: the server must answer */
    local = (struct pt_store *)&o;
    assert_int_equal(pt_config_open_local_queue(&cfg, db, &local, err, sizeof err), PT_OK);
    assert_null(local);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_example, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors_name_the_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock_timeout_above_request_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merge_fragments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_secret_permissions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lane_store_options, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
