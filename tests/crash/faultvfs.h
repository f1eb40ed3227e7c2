/*
 * faultvfs.h - a disk that loses power or fails, for make crash (docs/crash.md).
 *
 * An SQLite VFS over the default (unix) one, installed as the default so
 * that the store's walvfs.c sits on top of it: it sees exactly the
 * pwrite/fsync/ftruncate calls SQLite would make to the kernel.  Writes go
 * through to the real files (they play the page cache: every later read
 * sees them); what is durable is kept here, per file, as the image the file
 * had at its last sync.  Each write, sync and truncate is one "op",
 * numbered from 1 in the order the process makes them.
 */
#ifndef PT_FAULTVFS_H
#define PT_FAULTVFS_H

enum pt_fault_mode {
    PT_FAULT_NONE,  /* count ops only */
    PT_FAULT_POWER, /* before op N: power lost - only what was synced stays */
    PT_FAULT_TORN,  /* op N is a write torn at a 512-byte boundary, the rest as POWER */
    PT_FAULT_IOERR, /* from op N on every op fails (EIO or ENOSPC) until cleared */
};

/* Exit status of a process whose power was cut (the files are as a power
 * loss would leave them). */
#define PT_FAULT_CUT_EXIT 77

/* Registers the VFS as SQLite's default.  Call before the first database
 * is opened (and so before walvfs is registered). */
void pt_fault_install(void);

/* What happens at op `at` (1-based).  enospc: IOERR fails writes with
 * SQLITE_FULL (a full disk) instead of SQLITE_IOERR_WRITE. */
void pt_fault_arm(enum pt_fault_mode mode, long at, int enospc);

/* Ops made so far. */
long pt_fault_ops(void);

/* IOERR: 1 once op N was reached (ops fail), until pt_fault_clear(). */
int pt_fault_failing(void);

/* IOERR: the disk works again; the fault is disarmed. */
void pt_fault_clear(void);

/* Number of 512-byte boundaries strictly inside each write so far, by op:
 * for the count run, so that the torn runs know which ops can tear.
 * Returns the op count; writes[i] is for op i + 1 (0 for syncs). */
long pt_fault_tear_points(const unsigned char **writes);

/*
 * Power off now: every tracked file is rewritten to what it held at its
 * last sync (a file never synced disappears).  The process is left as if
 * the machine had stopped: the caller _exits without closing anything.
 * (The armed POWER and TORN cuts call it themselves and _exit with
 * PT_FAULT_CUT_EXIT.)
 */
void pt_fault_power_cut(void);

#endif
