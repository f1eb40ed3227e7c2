#!/usr/bin/env bash
# gateway_names.sh SRCDIR - "adding a gateway is adding a file and a line"
# holds only if nothing outside core/gateways/ names one (STYLE.md), and if
# the lists that cannot loop over the registry are held to it.  Fails:
#   * when the code of a C file - comments aside, strings and identifiers
#     included - names a gateway of the registry, except in core/gateways/,
#     the simulator (platform/sim/ and its command firmware/cmd_sim.c), the
#     demo's kiosk script (firmware/cmd_demo.c), and the tests and their
#     vectors;
#   * when the schema's list of gateways is not the registry's, in either
#     dialect: the newest gateway CHECK of sql/NNN_*.sql (a CHECK on the
#     column gateway) and the newest of sql/pg/NNN_*.sql (a CHECK on the
#     column gateway, or on VALUE in a DOMAIN whose name holds "gateway").
#     The newest, because a migration once released is not edited: a
#     gateway added later comes with a migration that widens the list;
#   * when firmware/openapi.json's lists are not the registry's: the enum of
#     components.schemas.Gateway; the enum of the "gateway" parameter of a
#     path with "{gateway}" (the gateways whose notify_route that template
#     writes, /notify/{gateway}: those with /notify/<name>), unless the
#     parameter is the Gateway schema itself (a route about any gateway:
#     /v1/reconciliations/{gateway}/{date}); and a "const"
#     or "enum" of any "gateway" property (qr_code's dependentSchemas ...)
#     may name only gateways of the registry.
# The registry: the .name of each table in core/gateways/ (and each table's
# .notify_route).  Prints every occurrence or difference; names in prose
# (SQL comments, OpenAPI descriptions) are not checked.
set -euo pipefail
SRC=${1:?usage: $0 SRCDIR}
cd "$SRC"
# The gateways: the .name of each table in core/gateways/.
names=$(grep -ho '^    \.name = "[^"]*",' core/gateways/*.c | sed 's/.*"\(.*\)".*/\1/' | sort -u)
[ -n "$names" ] || { echo "gateway_names: no gateway tables found in core/gateways" >&2; exit 1; }
[ "$(wc -w <<<"$names")" -ge 2 ] || { echo "gateway_names: found only: $names" >&2; exit 1; }
pattern=$(tr '\n' '|' <<<"$names" | sed 's/|$//')
bad=0
files=$(find core firmware platform \( -name '*.c' -o -name '*.h' \) |
    grep -v -e '^core/gateways/' -e '^platform/sim/' -e '^firmware/cmd_sim.c$' \
        -e '^firmware/cmd_demo.c$' | sort)
[ -n "$files" ] || { echo "gateway_names: no sources under $SRC" >&2; exit 1; }
# Comments blanked (their line breaks kept), strings and code left: a small
# scanner, because "//" inside a string ("https://...") is no comment.
found=$(for f in $files; do
    perl -e '
        local $/; my $s = <STDIN>; my $o = ""; my $i = 0; my $n = length $s;
        while ($i < $n) {
            my $c = substr($s, $i, 1); my $d = substr($s, $i, 2);
            if ($d eq "/*") { my $e = index($s, "*/", $i + 2); $e = $n - 2 if $e < 0;
                (my $t = substr($s, $i, $e + 2 - $i)) =~ s/[^\n]/ /g; $o .= $t; $i = $e + 2; }
            elsif ($d eq "//") { my $e = index($s, "\n", $i); $e = $n if $e < 0;
                $o .= " " x ($e - $i); $i = $e; }
            elsif ($c eq "\"" || $c eq "'\''") { my $j = $i + 1;
                while ($j < $n && substr($s, $j, 1) ne $c) { $j += substr($s, $j, 1) eq "\\" ? 2 : 1; }
                $o .= substr($s, $i, $j + 1 - $i); $i = $j + 1; }
            else { $o .= $c; $i++; }
        }
        print $o;' <"$f" | grep -inE "$pattern" | sed "s|^|$f:|" || true
done)
if [ -n "$found" ]; then
    echo "gateway_names: these files name a gateway outside core/gateways (use the registry):" >&2
    echo "$found" >&2
    echo "gateway_names: $(wc -l <<<"$found") occurrences in $(cut -d: -f1 <<<"$found" | sort -u | wc -l) files" >&2
    bad=1
else
    echo "gateway_names: no gateway named in $(wc -w <<<"$files") files outside core/gateways ($(tr '\n' ' ' <<<"$names"))"
fi

# The schema's lists: per dialect, the newest gateway CHECK in migration
# order (comments blanked; a CHECK's expression is its balanced parentheses;
# its gateways are the quoted literals in it).
for dir in sql sql/pg; do
    migrations=$(find "$dir" -maxdepth 1 -name '[0-9]*.sql' | sort)
    [ -n "$migrations" ] || { echo "gateway_names: no migrations in $dir" >&2; bad=1; continue; }
    last=$(for f in $migrations; do
        perl -e '
            local $/; my $s = <STDIN>; my $f = shift;
            $s =~ s/--[^\n]*//g;
            while ($s =~ /\bCHECK\s*\(/gi) {
                my $open = pos($s) - 1; my ($depth, $i) = (0, $open);
                for (; $i < length $s; $i++) {
                    my $c = substr($s, $i, 1);
                    if ($c eq "\x27") { my $e = index($s, "\x27", $i + 1); $i = $e < 0 ? length $s : $e; next; }
                    $depth++ if $c eq "("; last if $c eq ")" && --$depth == 0;
                }
                my $expr = substr($s, $open, $i + 1 - $open);
                my $stmt = substr($s, 0, $open); $stmt =~ s/.*;//s;
                next unless $expr =~ /\bgateway\b/i
                    || ($expr =~ /\bVALUE\b/i && $stmt =~ /\bDOMAIN\s+\w*gateway\w*/i);
                my $line = 1 + (substr($s, 0, $open) =~ tr/\n//);
                my @lit = $expr =~ /\x27([^\x27]*)\x27/g;
                print "$f:$line:", join(" ", sort @lit), "\n";
            }' "$f" <"$f"
    done | tail -n 1)
    if [ -z "$last" ]; then
        echo "gateway_names: no gateway CHECK found in $dir/*.sql (the schema must hold the registry's list)" >&2
        bad=1
        continue
    fi
    where=${last%:*}
    have=$(tr ' ' '\n' <<<"${last##*:}" | sed '/^$/d' | sort -u)
    missing=$(comm -23 <(echo "$names") <(echo "$have") | tr '\n' ' ')
    extra=$(comm -13 <(echo "$names") <(echo "$have") | tr '\n' ' ')
    if [ -z "$missing$extra" ]; then
        echo "gateway_names: $where (the newest gateway CHECK of $dir) agrees with the registry: $(echo $have)"
    else
        echo "gateway_names: $where (the newest gateway CHECK of $dir): missing [${missing% }], extra [${extra% }]" >&2
        bad=1
    fi
done

# OpenAPI's lists.
routes=$(grep -ho '^    \.notify_route = "[^"]*",' core/gateways/*.c | sed 's/.*"\(.*\)".*/\1/' | sort -u)
if ! perl -MJSON::PP -e '
    my ($doc, $names, $routes) = @ARGV;
    my %reg = map { $_ => 1 } split /\s+/, $names;
    my @routes = split /\s+/, $routes;
    open my $fh, "<", $doc or die "gateway_names: $doc: $!\n";
    my $api = eval { local $/; JSON::PP->new->decode(<$fh>) }
        or die "gateway_names: $doc is not JSON: $@";
    my $bad = 0;
    my $same = sub { # same(WHERE, WANT, HAVE...)
        my ($where, $want, @have) = @_;
        my %have = map { $_ => 1 } @have;
        my @missing = grep { !$have{$_} } sort keys %$want;
        my @extra = grep { !$want->{$_} } sort keys %have;
        if (@missing || @extra) {
            print STDERR "gateway_names: $doc $where: missing [@missing], extra [@extra]\n";
            $bad = 1;
        } else {
            print "gateway_names: $doc $where agrees with the registry: @have\n";
        }
    };
    my $g = $api->{components}{schemas}{Gateway};
    if (ref $g eq "HASH" && ref $g->{enum} eq "ARRAY") {
        $same->("components.schemas.Gateway.enum", \%reg, @{$g->{enum}});
    } else {
        print STDERR "gateway_names: $doc has no components.schemas.Gateway with an enum\n";
        $bad = 1;
    }
    for my $path (sort keys %{$api->{paths}}) {
        next unless $path =~ /^(.*)\{gateway\}(.*)$/;
        my ($pre, $post) = ($1, $2);
        my %want = map { $_ => 1 }
            map { /^\Q$pre\E([^\/]+)\Q$post\E$/ ? $1 : () } @routes;
        my @params = grep { ref $_ eq "HASH" && ($_->{name} // "") eq "gateway" }
            @{$api->{paths}{$path}{parameters} || []};
        my $enum = @params ? $params[0]{schema}{enum} : undef;
        my $ref = @params ? ($params[0]{schema}{"\$ref"} // "") : "";
        if ($ref eq "#/components/schemas/Gateway") {
            # Every gateway (a route about any gateway, not its notify
            # route): the Gateway enum, checked above, is the registry.
            print "gateway_names: $doc paths.$path gateway parameter is the Gateway schema\n";
        } elsif (ref $enum eq "ARRAY") {
            $same->("paths.$path gateway parameter enum", \%want, @$enum);
        } else {
            print STDERR "gateway_names: $doc paths.$path: its gateway parameter has no enum\n";
            $bad = 1;
        }
    }
    my $checked = 0;
    my $walk; $walk = sub {
        my ($node, $where) = @_;
        if (ref $node eq "HASH") {
            my $p = $node->{properties};
            if (ref $p eq "HASH" && ref $p->{gateway} eq "HASH") {
                my $s = $p->{gateway};
                for my $v (exists $s->{const} ? ($s->{const}) : (), @{$s->{enum} || []}) {
                    $checked++;
                    next if $reg{$v};
                    print STDERR "gateway_names: $doc $where.properties.gateway names \"$v\", not a gateway of the registry\n";
                    $bad = 1;
                }
            }
            $walk->($node->{$_}, "$where.$_") for sort keys %$node;
        } elsif (ref $node eq "ARRAY") {
            $walk->($node->[$_], "$where\[$_\]") for 0 .. $#$node;
        }
    };
    $walk->($api, "");
    print "gateway_names: $doc names only gateways of the registry in its $checked gateway const/enum values\n" unless $bad;
    exit $bad;' firmware/openapi.json "$names" "$routes"; then
    bad=1
fi
[ "$bad" = 0 ] || exit 1
