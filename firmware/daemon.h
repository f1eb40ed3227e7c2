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

/* Stops listeners and the sync engine, then closes the database.  NULL ok. */
void pt_daemon_stop(struct pt_daemon *d);

#endif
