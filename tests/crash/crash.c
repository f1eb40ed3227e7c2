/*
 * crash.c - pt_crash, the power-loss and I/O-error suite (make crash).
 *
 *   pt_crash [--walvfs on|off|both] [--only ID] [--seeds N] [--jobs N]
 *            [--dir DIR] [--keep]
 *
 * For each VFS setting: a fresh database (the template), a count run of
 * the mix (how many writes and syncs it makes, which writes can tear),
 * then one run per point - a power cut before every op, a torn write at
 * every op that spans a sector boundary, an I/O error from every op on
 * (EIO and ENOSPC in turn) - and, for the long runs, the mix drawn from
 * seeds 1..N cut at points drawn from the same seed.  Each run is a child
 * on its own copy of the template; another child checks what it left
 * (crash_check.c).  A failure is printed with its ID; --only ID runs that
 * one alone (make crash CRASH_ONLY=ID): "power:517", "torn:517",
 * "ioerr:517", "power:40@3" (seed 3), or a bare number for all three.
 * The last line is the summary make crash promises (SPEC section 12).
 */
#include "crash.h"

#include "err.h"
#include "log.h"
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The standard mix (steps of crash_mix.c, six rounds of its twelve kinds)
 * and the long runs.  Without walvfs SQLite writes a WAL frame in two calls
 * (header, page), so the same mix makes four times the ops: its standard
 * mix is two rounds, every one of its points still tried. */
#define STEPS 72
#define STEPS_NO_WALVFS 24
#define LONG_STEPS 180
#define CUTS_PER_SEED 60

static const char *vfs_name(int no_wal_vfs)
{
    return no_wal_vfs ? "off" : "on";
}

void crash_fail(const struct crash_run *run, const char *fmt, ...)
{
    char msg[3000];
    va_list ap;
    va_start(ap, fmt);
    int n =
        snprintf(msg, sizeof msg, "crash: FAIL walvfs=%s %s: ", vfs_name(run->no_wal_vfs), run->id);
    n += vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof msg - 2)
        n = (int)sizeof msg - 2;
    msg[n++] = '\n';
    (void)!write(STDOUT_FILENO, msg, (size_t)n);
}

void crash_config(struct pt_config *cfg)
{
    cfg->gw[pt_gateway_index("stripe")].configured = 1;
    cfg->gw[pt_gateway_index("alipay")].configured = 1;
    cfg->max_amount = 1000000;
    cfg->offline_limits[0] = (struct pt_cfg_offline_limit){"USD", 100000, 100000000};
    cfg->offline_limits[1] = (struct pt_cfg_offline_limit){"CNY", 100000, 100000000};
    cfg->n_offline_limits = 2;
    cfg->offline_max_count = 100000;
}

struct pt_idem_options crash_idem(int64_t instance)
{
    return (struct pt_idem_options){
        .ttl_ms = 86400000, .lock_timeout_ms = 60000, .instance = instance};
}

char *crash_hex(const char *p, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    char *h = malloc(2 * n + 1);
    if (!h)
        abort();
    for (size_t i = 0; i < n; i++) {
        h[2 * i] = digits[(unsigned char)p[i] >> 4];
        h[2 * i + 1] = digits[(unsigned char)p[i] & 15];
    }
    h[2 * n] = '\0';
    return h;
}

long crash_unhex(const char *hex, char *out, size_t cap)
{
    size_t n = strlen(hex);
    if (n % 2 || n / 2 > cap)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return -1;
        out[i] = (char)v;
    }
    return (long)(n / 2);
}

/* The store logs every storage failure and transition; the runs make
 * thousands of both on purpose.  PT_CRASH_VERBOSE=1 shows them. */
static void quiet(void *ctx, enum pt_log_level level, const char *line)
{
    (void)ctx;
    (void)level;
    (void)line;
}

/* ---- files -------------------------------------------------------------------------- */

static char base[400];
static int keep;

static void copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    char buf[65536];
    ssize_t n;
    if (in < 0 || out < 0)
        abort();
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n)
            abort();
    close(in);
    close(out);
}

static void remove_run(const char *dir)
{
    static const char *const names[] = {"c.db", "c.db-wal", "c.db-shm", "ledger"};
    char p[600];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    /* The retention pass's monthly files (data_dir/archive). */
    snprintf(p, sizeof p, "%s/archive", dir);
    DIR *d = opendir(p);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        char f[900];
        if (e->d_name[0] == '.')
            continue;
        snprintf(f, sizeof f, "%s/%s", p, e->d_name);
        unlink(f);
    }
    if (d)
        closedir(d);
    rmdir(p);
    rmdir(dir);
}

static char template_db[2][512];

/* A fresh database at the latest schema, closed cleanly (no WAL left). */
static void make_template(int no_wal_vfs)
{
    snprintf(template_db[no_wal_vfs], sizeof template_db[0], "%s/template-%s.db", base,
             vfs_name(no_wal_vfs));
    pid_t pid = fork();
    if (pid == 0) {
        char err[512];
        struct pt_store *st;
        struct pt_store_options o = {.path = template_db[no_wal_vfs], .no_wal_vfs = no_wal_vfs};
        if (pt_store_open(&o, &st, err, sizeof err) != PT_OK) {
            fprintf(stderr, "pt_crash: %s\n", err);
            _exit(1);
        }
        pt_store_close(st);
        _exit(0);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        fprintf(stderr, "pt_crash: cannot create the template database\n");
        exit(1);
    }
}

/* ---- one run: the mix cut at its point, then the check -------------------------------- */

static int wait_child(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (WIFSIGNALED(status))
        return 1000 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

/* In a child of its own: returns its exit status (0 when all held). */
static int run_point(struct crash_run *run, const char *count_file)
{
    char dir[450];
    snprintf(dir, sizeof dir, "%s/run-%d", base, (int)getpid());
    mkdir(dir, 0700);
    snprintf(run->db, sizeof run->db, "%s/c.db", dir);
    snprintf(run->ledger, sizeof run->ledger, "%s/ledger", dir);
    copy_file(template_db[run->no_wal_vfs], run->db);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        crash_mix(run);
        if (count_file) {
            /* The count run: how many ops, and where a write can tear. */
            const unsigned char *tears;
            long n = pt_fault_tear_points(&tears);
            FILE *f = fopen(count_file, "wb");
            if (!f || fwrite(tears, 1, (size_t)n, f) != (size_t)n || fclose(f))
                _exit(1);
        }
        /* Whatever was not synced when the mix ended is lost too. */
        pt_fault_power_cut();
        _exit(0);
    }
    int rc = wait_child(pid);
    int failed = 0;
    if (rc != 0 && rc != PT_FAULT_CUT_EXIT) {
        if (rc != 1) /* 1: the mix printed why */
            crash_fail(run, "the mix died (status %d)", rc);
        failed = 1;
    } else if ((pid = fork()) == 0) {
        _exit(crash_check(run) ? 1 : 0);
    } else if (wait_child(pid) != 0) {
        failed = 1;
    }
    if (failed)
        printf("crash: replay with: make crash CRASH_ONLY=%s CRASH_WALVFS=%s%s\n", run->id,
               vfs_name(run->no_wal_vfs), keep ? "" : " (add CRASH_KEEP=1 to keep the files)");
    if (failed && keep)
        printf("crash: files of %s in %s\n", run->id, dir);
    else
        remove_run(dir);
    fflush(stdout);
    return failed;
}

/* ---- the points, run a few at a time ---------------------------------------------------- */

struct totals {
    long power, torn, ioerr, failures;
};

static int jobs = 2, running;

static void reap(struct totals *t, int block)
{
    int status;
    pid_t pid;
    while (running && (pid = waitpid(-1, &status, block ? 0 : WNOHANG)) > 0) {
        running--;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            t->failures++;
        block = 0;
    }
}

static void launch(struct crash_run *run, struct totals *t)
{
    while (running >= jobs)
        reap(t, 1);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        _exit(run_point(run, NULL));
    if (pid < 0) {
        perror("pt_crash: fork");
        exit(1);
    }
    running++;
    if (run->mode == PT_FAULT_TORN)
        t->torn++;
    else if (run->mode == PT_FAULT_IOERR)
        t->ioerr++;
    else
        t->power++;
}

/* The count run of one mix: its ops and their tear points (malloc'd). */
static long count_ops(struct crash_run *run, unsigned char **tears)
{
    char count_file[450];
    snprintf(count_file, sizeof count_file, "%s/count", base);
    run->mode = PT_FAULT_NONE;
    snprintf(run->id, sizeof run->id, "count@%u", run->seed);
    pid_t pid = fork();
    if (pid == 0)
        _exit(run_point(run, count_file));
    if (wait_child(pid) != 0)
        return -1;
    FILE *f = fopen(count_file, "rb");
    *tears = malloc(1 << 20);
    long n = f && *tears ? (long)fread(*tears, 1, 1 << 20, f) : -1;
    if (f)
        fclose(f);
    unlink(count_file);
    return n;
}

static void set_point(struct crash_run *run, enum pt_fault_mode mode, long at)
{
    static const char *const names[] = {"count", "power", "torn", "ioerr"};
    run->mode = mode;
    run->at = at;
    run->enospc = mode == PT_FAULT_IOERR && at % 2 == 0;
    if (run->seed)
        snprintf(run->id, sizeof run->id, "%s:%ld@%u", names[mode], at, run->seed);
    else
        snprintf(run->id, sizeof run->id, "%s:%ld", names[mode], at);
}

/* Every point of the standard mix. */
static int standard(int no_wal_vfs, struct totals *t)
{
    struct crash_run run = {.steps = no_wal_vfs ? STEPS_NO_WALVFS : STEPS,
                            .no_wal_vfs = no_wal_vfs};
    unsigned char *tears = NULL;
    long n = count_ops(&run, &tears);
    if (n <= 0) {
        printf("crash: FAIL walvfs=%s: the mix does not run through without faults\n",
               vfs_name(no_wal_vfs));
        t->failures++;
        free(tears);
        return -1;
    }
    printf("crash: walvfs=%s: the mix makes %ld writes and syncs\n", vfs_name(no_wal_vfs), n);
    fflush(stdout);
    for (long at = 1; at <= n; at++) {
        set_point(&run, PT_FAULT_POWER, at);
        launch(&run, t);
        if (tears[at - 1]) {
            set_point(&run, PT_FAULT_TORN, at);
            launch(&run, t);
        }
        set_point(&run, PT_FAULT_IOERR, at);
        launch(&run, t);
    }
    free(tears);
    return 0;
}

/* Long runs: seeded mixes, cut at seeded points. */
static void long_runs(int no_wal_vfs, int seeds, struct totals *t)
{
    for (int seed = 1; seed <= seeds; seed++) {
        reap(t, 1);
        struct crash_run run = {
            .steps = LONG_STEPS, .no_wal_vfs = no_wal_vfs, .seed = (unsigned)seed};
        unsigned char *tears = NULL;
        long n = count_ops(&run, &tears);
        if (n <= 0) {
            printf("crash: FAIL walvfs=%s seed %d: the mix does not run through\n",
                   vfs_name(no_wal_vfs), seed);
            t->failures++;
            free(tears);
            continue;
        }
        unsigned r = (unsigned)seed * 2654435761u;
        for (int i = 0; i < CUTS_PER_SEED; i++) {
            r = r * 1103515245u + 12345u;
            long at = 1 + (long)((r >> 8) % (unsigned long)n);
            set_point(&run, PT_FAULT_POWER, at);
            launch(&run, t);
            if (tears[at - 1] && i % 2) {
                set_point(&run, PT_FAULT_TORN, at);
                launch(&run, t);
            }
        }
        free(tears);
    }
}

/* "power:517", "torn:40@3", "517" (every kind at 517). */
static int only(const char *id, int no_wal_vfs, struct totals *t)
{
    static const struct {
        const char *name;
        enum pt_fault_mode mode;
    } kinds[] = {{"power", PT_FAULT_POWER}, {"torn", PT_FAULT_TORN}, {"ioerr", PT_FAULT_IOERR}};
    char kind[16] = "";
    long at = 0;
    unsigned seed = 0;
    const char *num = strchr(id, ':') ? strchr(id, ':') + 1 : id;
    if (num != id)
        snprintf(kind, sizeof kind, "%.*s", (int)(num - id - 1), id);
    if (sscanf(num, "%ld", &at) != 1 || at < 1) {
        fprintf(stderr, "pt_crash: --only %s: want power:N, torn:N, ioerr:N (@SEED) or N\n", id);
        return 2;
    }
    if (strchr(num, '@'))
        seed = (unsigned)atoi(strchr(num, '@') + 1);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        if (kind[0] && strcmp(kind, kinds[k].name) != 0)
            continue;
        struct crash_run run = {.steps = seed         ? LONG_STEPS
                                         : no_wal_vfs ? STEPS_NO_WALVFS
                                                      : STEPS,
                                .no_wal_vfs = no_wal_vfs,
                                .seed = seed};
        set_point(&run, kinds[k].mode, at);
        launch(&run, t);
        reap(t, 1);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *walvfs = "both", *only_id = NULL, *dir = NULL;
    int seeds = 10;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--walvfs") && v)
            walvfs = v, i++;
        else if (!strcmp(a, "--only") && v)
            only_id = *v ? v : NULL, i++;
        else if (!strcmp(a, "--seeds") && v)
            seeds = atoi(v), i++;
        else if (!strcmp(a, "--jobs") && v)
            jobs = atoi(v) > 0 ? atoi(v) : 1, i++;
        else if (!strcmp(a, "--dir") && v)
            dir = v, i++;
        else if (!strcmp(a, "--keep"))
            keep = 1;
        else {
            fprintf(stderr, "usage: pt_crash [--walvfs on|off|both] [--only ID] [--seeds N] "
                            "[--jobs N] [--dir DIR] [--keep]\n");
            return 2;
        }
    }
    if (strcmp(walvfs, "on") && strcmp(walvfs, "off") && strcmp(walvfs, "both")) {
        fprintf(stderr, "pt_crash: --walvfs takes on, off or both\n");
        return 2;
    }
    /* tmpfs when there is one: the runs' files stand for a page cache. */
    if (!dir)
        dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm"
              : getenv("TMPDIR")            ? getenv("TMPDIR")
                                            : "/tmp";
    snprintf(base, sizeof base, "%s/pt-crash-XXXXXX", dir);
    if (!mkdtemp(base)) {
        perror("pt_crash: mkdtemp");
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!getenv("PT_CRASH_VERBOSE"))
        pt_log_set_sink(quiet, NULL);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct totals all = {0};
    for (int off = 0; off < 2; off++) {
        if (strcmp(walvfs, "both") && strcmp(walvfs, vfs_name(off)))
            continue;
        struct totals t = {0};
        make_template(off);
        if (only_id) {
            if (only(only_id, off, &t))
                return 2;
        } else {
            standard(off, &t);
            long_runs(off, seeds, &t);
        }
        reap(&t, 1);
        while (running)
            reap(&t, 1);
        printf("crash: walvfs=%s: %ld power cuts, %ld torn writes, %ld I/O-error points, %ld "
               "failures\n",
               vfs_name(off), t.power, t.torn, t.ioerr, t.failures);
        all.power += t.power;
        all.torn += t.torn;
        all.ioerr += t.ioerr;
        all.failures += t.failures;
        unlink(template_db[off]);
    }
    rmdir(base);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("crash: %.1f s\n", (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
    printf("crash: %ld power cuts, %ld torn writes, %ld I/O-error points, %ld failures\n",
           all.power, all.torn, all.ioerr, all.failures);
    return all.failures ? 1 : 0;
}
