/*
 * cli.c - helpers shared by the subcommands (config options, errors).
 */
#include "cli.h"
#include "err.h"
#include "store.h"

#include <errno.h>
#include <sys/stat.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_CONFIG "/etc/payterm/payterm.json"

int pt_cli_take_config(struct pt_cli_common *c, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const char *file = NULL;
    if (strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0) {
        if (*i + 1 >= argc) {
            fprintf(stderr, "payterm: %s needs a file name\n", a);
            return -1;
        }
        file = argv[++*i];
    } else if (strncmp(a, "--config=", 9) == 0) {
        file = a + 9;
    } else {
        return 0;
    }
    if (c->nconfigs >= PT_CLI_MAX_CONFIGS) {
        fprintf(stderr, "payterm: at most %d -c/--config files\n", PT_CLI_MAX_CONFIGS);
        return -1;
    }
    c->configs[c->nconfigs++] = file;
    return 1;
}

int pt_cli_load_config(const struct pt_cli_common *c, struct pt_config *cfg)
{
    char err[512];
    const char *def = DEFAULT_CONFIG;
    const char *const *paths = c->configs;
    int n = c->nconfigs;
    if (n == 0 && access(def, F_OK) == 0) {
        paths = &def;
        n = 1;
    }
    if (pt_config_load(paths, n, cfg, err, sizeof err) != PT_OK) {
        fprintf(stderr, "payterm: %s\n", err);
        return -1;
    }
    return 0;
}

void pt_cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "payterm %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* Creates data_dir (mode 0700) when missing. */
int pt_cli_ensure_dir(const char *cmd, const char *dir)
{
    struct stat sb;
    if (stat(dir, &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            return 0;
        pt_cli_error(cmd, "data_dir %s exists but is not a directory", dir);
        return -1;
    }
    if (mkdir(dir, 0700) != 0) {
        pt_cli_error(cmd, "cannot create data_dir %s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

int pt_cli_open_store(const char *cmd, const struct pt_config *cfg, struct pt_store **st)
{
    char path[PT_CFG_PATH_MAX + 16], err[768];
    pt_config_db_path(cfg, path, sizeof path);
    struct pt_store_options o = {.path = path, .synchronous_normal = cfg->synchronous_normal};
    if (pt_store_open(&o, st, err, sizeof err) != PT_OK) {
        pt_cli_error(cmd, "%s", err);
        return -1;
    }
    return 0;
}

int pt_cli_open_existing(const char *cmd, const struct pt_config *cfg, enum pt_cli_db mode,
                         struct pt_store **st)
{
    char path[PT_CFG_PATH_MAX + 16], err[1024];
    pt_config_db_path(cfg, path, sizeof path);
    *st = NULL;
    /* SQLite would say "unable to open database file"; the operator needs
     * the path, and to know that nothing was created in its place. */
    struct stat sb;
    if (stat(path, &sb) != 0) {
        pt_cli_error(cmd, "database %s: %s (data_dir %s; payterm init or payterm serve creates it)",
                     path, strerror(errno), cfg->data_dir);
        return -1;
    }
    struct pt_store_options o = {.path = path,
                                 .readonly = mode != PT_CLI_DB_MAINTAIN,
                                 .existing = mode == PT_CLI_DB_MAINTAIN,
                                 .synchronous_normal = cfg->synchronous_normal};
    if (pt_store_open(&o, st, err, sizeof err) != PT_OK) {
        pt_cli_error(cmd, "%s", err);
        return -1;
    }
    int version = 0, latest = pt_store_schema_latest();
    if (pt_store_schema_version(*st, &version) != PT_OK) {
        pt_cli_error(cmd, "database %s: cannot read its schema version: %s", path,
                     pt_store_errmsg(*st));
    } else if (version == 0) {
        pt_cli_error(cmd,
                     "%s is not a payterm database (schema version 0); payterm init "
                     "creates one",
                     path);
    } else if (version < latest && mode != PT_CLI_DB_COPY) {
        pt_cli_error(cmd,
                     "database %s has schema version %d, this payterm needs %d: run "
                     "payterm init (or start payterm serve) to migrate it",
                     path, version, latest);
    } else {
        return 0;
    }
    pt_store_close(*st);
    *st = NULL;
    return -1;
}

static int find(const char *const *list, const char *arg)
{
    for (int k = 0; list && list[k] && k < PT_CLI_MAX_OPTS; k++)
        if (strcmp(list[k], arg) == 0)
            return k;
    return -1;
}

int pt_cli_parse(const char *cmd, const char *help, int argc, char **argv, struct pt_cli_args *a)
{
    memset(&a->common, 0, sizeof a->common);
    memset(a->values, 0, sizeof a->values);
    memset(a->flag_set, 0, sizeof a->flag_set);
    a->npos = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(help, stdout);
            return 1;
        }
        int r = pt_cli_take_config(&a->common, argc, argv, &i);
        if (r < 0)
            return -1;
        if (r)
            continue;
        int k;
        if ((k = find(a->names, argv[i])) >= 0) {
            if (i + 1 >= argc) {
                pt_cli_error(cmd, "%s needs a value", argv[i]);
                return -1;
            }
            a->values[k] = argv[++i];
        } else if ((k = find(a->flags, argv[i])) >= 0) {
            a->flag_set[k] = 1;
        } else if (argv[i][0] != '-' && a->npos < a->maxpos && a->npos < 4) {
            a->pos[a->npos++] = argv[i];
        } else {
            pt_cli_error(cmd, "unexpected argument '%s' (see payterm %s --help)", argv[i], cmd);
            return -1;
        }
    }
    return 0;
}
