/*
 * simtest.h - fixtures for the tests that run payterm's real pieces against
 * the gateway simulator: a simulator on a free port in a temporary directory,
 * the libcurl transport trusting its CA, the four gateway configurations read
 * from its gateways.json, and a tiny plain-HTTP receiver for notifications.
 */
#ifndef PT_SIMTEST_H
#define PT_SIMTEST_H

#include <pthread.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "gateway.h"
#include "platform.h"
#include "sim.h"
#include "transport_curl.h"

enum { ST_ALIPAY = 0, ST_WECHAT, ST_STRIPE, ST_2C2P, ST__COUNT };

struct simtest {
    char dir[512];
    struct pt_sim_options opt; /* as started (dir and listen filled in) */
    struct pt_sim *sim;
    int port;
    struct pt_curl *curl;              /* trusts DIR/ca.pem */
    struct pt_config cfg;              /* DIR/gateways.json */
    struct pt_gw_config gw[ST__COUNT]; /* alipay, wechat, stripe, 2c2p */
};

extern const char *const simtest_gw_names[ST__COUNT];

/* Starts a simulator (quiet, port 0) in a new temporary directory; opt may be
 * NULL or give pay_delay_ms, idle_timeout_ms, notify_base... */
void simtest_start(struct simtest *t, const struct pt_sim_options *opt);
/* Stops and starts the simulator on the same directory (new port) and
 * reloads the gateway configurations. */
void simtest_restart(struct simtest *t);
/* Stops everything and removes the directory. */
void simtest_stop(struct simtest *t);

/* POST /_sim/faults with the JSON text; asserts HTTP 200. */
void simtest_fault(struct simtest *t, const char *json);
/* The ledger row of (gateway, order) as a detached cJSON object (caller
 * deletes), or NULL when the simulator has no trade for it. */
cJSON *simtest_ledger_row(struct simtest *t, const char *gateway, const char *order_id);
/* captures of the row, -1 when there is none; status copied when not NULL. */
int simtest_captures(struct simtest *t, const char *gateway, const char *order_id, char status[16]);

/* A charge for gateway gw with the method payterm uses for it. */
void simtest_charge(struct pt_charge *c, int gw, const char *order_id, int64_t amount,
                    const char *currency);
/*
 * Builds op for c with gw's adapter, sends it through the curl transport
 * (channel = the gateway name) and, when an answer came, parses it into *res.
 * Returns the transport's rc (PT_OK, PT_ENOTSENT, PT_ENOANSWER); the raw
 * answer is kept in *raw when raw is not NULL (caller frees).
 */
int simtest_call(struct simtest *t, int gw, enum pt_gw_op op, const struct pt_charge *c,
                 int timeout_ms, struct pt_gw_result *res, struct pt_http_response *raw);
/* Same with an explicit transport and gateway configuration. */
int simtest_call_with(struct pt_curl *curl, const struct pt_gw_config *cfg, int gw,
                      enum pt_gw_op op, const struct pt_charge *c, int timeout_ms,
                      struct pt_gw_result *res, struct pt_http_response *raw);

/* A unique order id with the given prefix ("T-<prefix>-<n>-<pid>"). */
void simtest_order_id(char *out, size_t outlen, const char *prefix);

void simtest_sleep_ms(int ms);

/* ---- notification receiver -------------------------------------------------- */

#define RECV_MAX 256

struct recv_msg {
    char path[64];
    struct pt_http_response msg; /* headers and body as received */
};

struct receiver {
    int fd, port;
    pthread_t thread;
    int stop_pipe[2];
    pthread_mutex_t lk;
    pthread_cond_t cond;
    struct recv_msg msgs[RECV_MAX];
    int n;
    /* Per path prefix: the first wrong_first requests get a wrong reply. */
    int wrong_first;
    int wrong_given;
};

void receiver_start(struct receiver *r);
void receiver_stop(struct receiver *r);
/* Waits until at least n messages whose body contains needle (NULL: any) have
 * arrived, or timeout_ms; returns how many there are. */
int receiver_wait(struct receiver *r, const char *needle, int n, int timeout_ms);

#endif
