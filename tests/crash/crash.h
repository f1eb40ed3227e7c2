/*
 * crash.h - what the parts of the power-loss suite (make crash) share.
 *
 * pt_crash (crash.c) runs the mix (crash_mix.c) in a child process on a
 * copy of a fresh database, with the fault-injecting disk (faultvfs.c)
 * under the store; the power goes (or the disk fails) at one numbered
 * write or sync; then another fresh process opens what is left and checks
 * SPEC section 12's invariants (crash_check.c) against the ledger the mix
 * kept of every answer it received.  docs/crash.md tells the whole story.
 */
#ifndef PT_CRASH_H
#define PT_CRASH_H

/* The longest ledger line (a reconciliation run's answer, hex). */
#define CRASH_LEDGER_LINE_MAX (1 << 20)

#include <stddef.h>

#include "config.h"
#include "faultvfs.h"
#include "idem.h"
#include "intake.h"

/* The mix's clock starts here (ms). */
#define CRASH_T0 1700000000000LL

struct crash_run {
    char id[64]; /* "power:517", "torn:12@3", ...: what replays it */
    enum pt_fault_mode mode;
    long at;
    int enospc;
    unsigned seed; /* 0: the standard mix; others draw its steps */
    int steps;
    int no_wal_vfs;
    char db[512];
    char ledger[512];
};

/* Runs the mix (in the calling process, which it may _exit at the cut). */
void crash_mix(const struct crash_run *run);

/* Checks the database left at run->db against run->ledger (a fresh
 * process).  Returns the number of failures, each printed. */
int crash_check(const struct crash_run *run);

/* Prints "crash: FAIL <id>: ..." (one write, so parallel runs do not mix). */
void crash_fail(const struct crash_run *run, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The configuration and key options both the mix and the checker use. */
void crash_config(struct pt_config *cfg);
struct pt_idem_options crash_idem(int64_t instance);

/* Hex of n bytes (malloc'd) and back (returns the length, -1 if bad). */
char *crash_hex(const char *p, size_t n);
long crash_unhex(const char *hex, char *out, size_t cap);

#endif
