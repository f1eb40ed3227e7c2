#!/bin/sh
# cluster.sh - a throw-away PostgreSQL cluster for the store server's tests
# (SPEC 16): Debian's postgresql package, initdb'd under a temp dir, run as
# an unprivileged user (nobody, when started as root), reachable only on a
# Unix socket in that dir.
#
# usage: cluster.sh start STATE   initdb + start; writes STATE (the DSN on line
#                                 one, the cluster's dir on line two)
#        cluster.sh stop STATE    stop it and remove its dir
#        cluster.sh pg_ctl STATE stop|start   stop or restart the server only
#                                 (tests of PostgreSQL going away)
# PT_PG_SHARED_BUFFERS: the server's shared_buffers (default 32MB: every test
# database is tiny; the benchmark's is not, and runs PostgreSQL's own 128MB).
set -eu
cmd=${1:?usage: cluster.sh start|stop|pg_ctl STATE}
state=${2:?usage: cluster.sh start|stop|pg_ctl STATE}

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
    echo "cluster.sh: PostgreSQL's server is not installed (scripts/deps.sh installs postgresql)" >&2
    exit 1
fi
server_opts() {
    echo "-c listen_addresses='' -k $1 -p 5432 -c fsync=on -c synchronous_commit=on -c shared_buffers=${PT_PG_SHARED_BUFFERS:-32MB} -c max_connections=200"
}
as_user() {
    if [ "$(id -u)" = 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi
}

# PostgreSQL will not run as root; as nobody it needs to reach its own
# binaries.  A root directory of mode 0700 (seen in chroots made from a
# mktemp -d) stops that for every program: say so and give others search
# permission on / only (what a Debian system has anyway: 0755).
if [ "$(id -u)" = 0 ] && ! runuser -u nobody -- test -x "$bindir/initdb" 2>/dev/null; then
    if ! runuser -u nobody -- test -x / 2>/dev/null; then
        echo "cluster.sh: / has mode $(stat -c %a /); adding o+x so that PostgreSQL can run as nobody" >&2
        chmod o+x /
    fi
    runuser -u nobody -- test -x "$bindir/initdb" || {
        echo "cluster.sh: user nobody cannot run $bindir/initdb (check the modes of its directories)" >&2
        exit 1
    }
fi

case "$cmd" in
start)
    [ -f "$state" ] && "$0" stop "$state" 2>/dev/null || true
    dir=$(mktemp -d /tmp/payterm-pg.XXXXXX)
    chmod 755 "$dir"
    [ "$(id -u)" = 0 ] && chown nobody "$dir"
    as_user "$bindir/initdb" -D "$dir/data" -U payterm --auth=trust -E UTF8 --no-locale \
        >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    # Trust on its socket, but for the role pw_lane: a password (the store's
    # password_file, and a wrong one refused).
    { echo "local all pw_lane scram-sha-256"; cat "$dir/data/pg_hba.conf"; } >"$dir/hba.new"
    as_user cp "$dir/hba.new" "$dir/data/pg_hba.conf"
    # Durable as a shop's server must be (fsync, synchronous_commit on), on
    # a socket only; small, since every test database is tiny.
    as_user "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "$(server_opts "$dir")" \
        start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
    printf 'host=%s port=5432 user=payterm\n%s\n' "$dir" "$dir" >"$state"
    echo "cluster.sh: PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') at $dir"
    ;;
stop)
    [ -f "$state" ] || exit 0
    dir=$(sed -n 2p "$state")
    [ -d "$dir/data" ] && as_user "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    case "$dir" in /tmp/payterm-pg.*) rm -rf "$dir" ;; esac
    rm -f "$state"
    ;;
pg_ctl)
    what=${3:?usage: cluster.sh pg_ctl STATE stop|start}
    dir=$(sed -n 2p "$state")
    case "$what" in
    stop) as_user "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null ;;
    start) as_user "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "$(server_opts "$dir")" start >/dev/null ;;
    *) echo "cluster.sh: pg_ctl stop|start" >&2; exit 2 ;;
    esac
    ;;
*)
    echo "cluster.sh: unknown command $cmd (start, stop, pg_ctl)" >&2
    exit 2
    ;;
esac
