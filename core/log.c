/*
 * log.c - formats log lines and hands them to the installed sink.
 */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static const char *const level_names[] = {"error", "warn", "info", "debug"};

static void default_sink(void *ctx, enum pt_log_level level, const char *line)
{
    (void)ctx;
    fprintf(stderr, "payterm[%s]: %s\n", level_names[level], line);
}

static pt_log_sink g_sink = default_sink;
static void *g_ctx;
/* Changed by a reload (SIGHUP) while other threads log. */
static atomic_int g_level = PT_LOG_INFO;

void pt_log_set_sink(pt_log_sink sink, void *ctx)
{
    g_sink = sink ? sink : default_sink;
    g_ctx = ctx;
}

void pt_log_set_level(enum pt_log_level max_level)
{
    atomic_store(&g_level, (int)max_level);
}

enum pt_log_level pt_log_get_level(void)
{
    return (enum pt_log_level)atomic_load(&g_level);
}

int pt_log_level_parse(const char *s, enum pt_log_level *out)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum pt_log_level)i;
            return 0;
        }
    }
    return -1;
}

void pt_log(enum pt_log_level level, const char *fmt, ...)
{
    if ((int)level > atomic_load(&g_level))
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    g_sink(g_ctx, level, line);
}
