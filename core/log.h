/*
 * log.h - core's logging front end.
 *
 * Core code calls pt_log(); the line is formatted here and handed to the sink
 * the program installed (platform/linux writes to stderr or syslog).  Secrets
 * must never be passed in: log order ids, states and error names, not keys,
 * signatures or payment codes.
 */
#ifndef PT_LOG_H
#define PT_LOG_H

#include "platform.h"

typedef void (*pt_log_sink)(void *ctx, enum pt_log_level level, const char *line);

/* Installs the sink (NULL restores the default: stderr) and the most verbose
 * level that is still written. */
void pt_log_set_sink(pt_log_sink sink, void *ctx);
void pt_log_set_level(enum pt_log_level max_level);
enum pt_log_level pt_log_get_level(void);

/* Parses "error", "warn", "info", "debug"; PT_OK or PT_EINVAL. */
int pt_log_level_parse(const char *s, enum pt_log_level *out);

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void pt_log(enum pt_log_level level, const char *fmt, ...);

#define pt_log_error(...) pt_log(PT_LOG_ERROR, __VA_ARGS__)
#define pt_log_warn(...) pt_log(PT_LOG_WARN, __VA_ARGS__)
#define pt_log_info(...) pt_log(PT_LOG_INFO, __VA_ARGS__)
#define pt_log_debug(...) pt_log(PT_LOG_DEBUG, __VA_ARGS__)

#endif
