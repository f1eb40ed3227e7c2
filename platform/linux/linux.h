/*
 * linux.h - the Linux implementation of core's platform interfaces.
 *
 * pt_linux_platform() returns a pt_platform whose clock is clock_gettime,
 * whose randomness is getrandom(2), and whose log sink writes to stderr or
 * syslog.  The libcurl transport is attached separately (transport_curl.h).
 */
#ifndef PT_LINUX_H
#define PT_LINUX_H

#include "platform.h"

/* The process-wide Linux platform table (clock, random, log). */
const struct pt_platform *pt_linux_platform(void);

/* Wall clock and monotonic clock in milliseconds. */
int64_t pt_linux_now_ms(void);
int64_t pt_linux_mono_ms(void);

/* The boot-time clock (CLOCK_BOOTTIME, counts suspend) in milliseconds,
 * this boot's id (/proc/sys/kernel/random/boot_id; PT_OK or an error), and
 * whether the kernel says the wall clock is synchronised (adjtimex). */
int64_t pt_linux_boot_ms(void);
int pt_linux_boot_id(char *out, size_t cap);
int pt_linux_wall_synced(void);

/* Fills buf with len random bytes from getrandom(2). PT_OK or PT_ESYS. */
int pt_linux_random(void *buf, size_t len);

/*
 * The daemon's log file (serve --log-file): opened for appending onto
 * stderr (mode 0640 when created), remembered for pt_linux_log_reopen()
 * (SIGHUP: a file moved away by logrotate is followed by a new one).  With
 * pt_linux_log_set_max_bytes(N), N > 0, the file and PATH.1 together never
 * hold more than N bytes: the file is renamed to PATH.1 before a line would
 * take it past N/2, or emptied where it cannot be renamed (a line in it
 * says so).  0 = no limit.  PT_OK or PT_ESYS (errno set).
 */
int pt_linux_log_open_file(const char *path);
int pt_linux_log_reopen(void);
void pt_linux_log_set_max_bytes(int64_t max_bytes);

/* Routes core's log lines to syslog (1) or stderr (0). */
void pt_linux_log_use_syslog(int on);
/* Looks again whether stderr is systemd's journal stream (JOURNAL_STREAM):
 * lines then carry a <N> priority prefix instead of a timestamp.  After
 * stderr was reopened (SIGHUP). */
void pt_linux_log_detect(void);

/* 1 when stderr is the stream systemd's journal reads (JOURNAL_STREAM names
 * its device and inode), looked at now. */
int pt_linux_stderr_is_journal(void);

/*
 * Writes a command's message to stderr, one write per line, each line
 * after "<priority>" (syslog's numbers: 3 error, 5 notice) when stderr is
 * the journal, so that `journalctl -p` sorts it (sd-daemon(3)); as it is
 * otherwise.  For what a command says to the person or unit that ran it
 * (the CLI's errors); the daemon's own lines go through pt_log().
 */
void pt_linux_say(int priority, const char *text);

#endif
