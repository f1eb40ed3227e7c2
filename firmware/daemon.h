/*
 * daemon.h - assembles the running service from its parts.
 *
 * Configuration in, a running daemon out: the database (created and
 * migrated), the HTTP listeners, and the sync engine with its gateway
 * adapters and transport.  `payterm serve` owns the process around it
 * (signals, systemd, timers).
 */
#ifndef PT_DAEMON_H
#define PT_DAEMON_H

#include <stddef.h>

#include "config.h"

struct pt_daemon;
struct pt_store;

/* Starts everything; on failure writes a sentence naming what failed. */
int pt_daemon_start(const struct pt_config *cfg, struct pt_daemon **out, char *err, size_t errlen);

/*
 * Checks, without starting anything, everything pt_daemon_start() would
 * refuse in the files the configuration names: secret file modes, the API
 * token, every configured gateway's keys, a tls.ca_file holding at least
 * one certificate.  On failure err lists every problem, one per line.
 */
int pt_daemon_check(const struct pt_config *cfg, char *err, size_t errlen);

/* The main thread's own database connection (sweeps). */
struct pt_store *pt_daemon_store(struct pt_daemon *d);

/*
 * SIGHUP (SPEC 11): cfg is the configuration read anew.  The keys that can
 * change live (log level, limits, offline limits, sync timing, gateway keys
 * and endpoints) take effect for the next request and sync batch; one that
 * needs a restart is named in a warning and keeps its running value.  A
 * configuration serve would refuse (a key file with a bad mode, a gateway
 * key that does not load) changes nothing: err says why.
 */
int pt_daemon_reload(struct pt_daemon *d, const struct pt_config *cfg, char *err, size_t errlen);

/* The watchdog's test: 1 when the sync thread has not been stuck for more
 * than stall_ms and the main listener answers GET /healthz; otherwise 0 and
 * why says what is wrong.  Blocks up to 2 s. */
int pt_daemon_healthy(struct pt_daemon *d, int64_t stall_ms, char *why, size_t len);

/* systemd's STATUS= text: the queue depth, charges in progress, in review. */
int pt_daemon_status_line(struct pt_daemon *d, char *out, size_t len);

/* Stops listeners and the sync engine, then closes the database.  NULL ok. */
void pt_daemon_stop(struct pt_daemon *d);

#endif
