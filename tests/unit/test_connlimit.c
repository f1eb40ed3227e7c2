/*
 * test_connlimit.c - the per-address connection cap of the HTTP API (SPEC 5,
 * "Input strictness and connection handling"): 16 connections per client
 * address over both listeners, the kiosk's own 127.0.0.1 and ::1 not capped.
 */
#include "testutil.h"

#include "connlimit.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

/* The address as a sockaddr (static storage, a few at a time). */
static const struct sockaddr *SA(const char *text)
{
    static struct sockaddr_storage ring[8];
    static int next;
    struct sockaddr_storage *ss = &ring[next++ % 8];
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, text, &v4->sin_addr) == 1)
        v4->sin_family = AF_INET;
    else if (inet_pton(AF_INET6, text, &v6->sin6_addr) == 1)
        v6->sin6_family = AF_INET6;
    else
        fail_msg("bad address %s", text);
    return (const struct sockaddr *)ss;
}

static void test_which_addresses_are_uncapped(void **state)
{
    (void)state;
    assert_true(pt_connlimit_uncapped(SA("127.0.0.1")));
    assert_true(pt_connlimit_uncapped(SA("::1")));
    assert_true(pt_connlimit_uncapped(SA("::ffff:127.0.0.1")));
    assert_false(pt_connlimit_uncapped(SA("127.0.0.2")));
    assert_false(pt_connlimit_uncapped(SA("10.0.0.1")));
    assert_false(pt_connlimit_uncapped(SA("::2")));
    assert_false(pt_connlimit_uncapped(SA("fe80::1")));
    assert_false(pt_connlimit_uncapped(NULL));
}

static void test_sixteen_per_address(void **state)
{
    (void)state;
    struct pt_connlimit *l = pt_connlimit_new(16, 64);
    assert_non_null(l);
    for (int i = 0; i < 16; i++) {
        assert_true(pt_connlimit_would_admit(l, SA("203.0.113.7")));
        assert_true(pt_connlimit_acquire(l, SA("203.0.113.7")));
    }
    assert_false(pt_connlimit_would_admit(l, SA("203.0.113.7")));
    assert_false(pt_connlimit_acquire(l, SA("203.0.113.7")));
    /* The same client over IPv4-mapped IPv6 is the same address. */
    assert_false(pt_connlimit_acquire(l, SA("::ffff:203.0.113.7")));
    /* Another address has its own 16. */
    for (int i = 0; i < 16; i++)
        assert_true(pt_connlimit_acquire(l, SA("203.0.113.8")));
    assert_false(pt_connlimit_acquire(l, SA("203.0.113.8")));
    /* A closed connection frees its slot. */
    pt_connlimit_release(l, SA("::ffff:203.0.113.7"));
    assert_true(pt_connlimit_would_admit(l, SA("203.0.113.7")));
    assert_true(pt_connlimit_acquire(l, SA("203.0.113.7")));
    assert_false(pt_connlimit_acquire(l, SA("203.0.113.7")));
    for (int i = 0; i < 16; i++) {
        pt_connlimit_release(l, SA("203.0.113.7"));
        pt_connlimit_release(l, SA("203.0.113.8"));
    }
    pt_connlimit_destroy(l);
}

static void test_loopback_never_capped_nor_counted(void **state)
{
    (void)state;
    struct pt_connlimit *l = pt_connlimit_new(16, 2);
    assert_non_null(l);
    for (int i = 0; i < 1000; i++) {
        assert_true(pt_connlimit_acquire(l, SA("127.0.0.1")));
        assert_true(pt_connlimit_acquire(l, SA("::1")));
    }
    /* They took none of the two slots. */
    assert_true(pt_connlimit_acquire(l, SA("192.0.2.1")));
    assert_true(pt_connlimit_acquire(l, SA("2001:db8::1")));
    for (int i = 0; i < 1000; i++) {
        pt_connlimit_release(l, SA("127.0.0.1"));
        pt_connlimit_release(l, SA("::1"));
    }
    /* The table is full: a third capped address waits for a slot. */
    assert_false(pt_connlimit_would_admit(l, SA("192.0.2.2")));
    assert_false(pt_connlimit_acquire(l, SA("192.0.2.2")));
    pt_connlimit_release(l, SA("192.0.2.1"));
    assert_true(pt_connlimit_acquire(l, SA("192.0.2.2")));
    pt_connlimit_release(l, SA("192.0.2.2"));
    pt_connlimit_release(l, SA("2001:db8::1"));
    pt_connlimit_destroy(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_which_addresses_are_uncapped),
        cmocka_unit_test(test_sixteen_per_address),
        cmocka_unit_test(test_loopback_never_capped_nor_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
