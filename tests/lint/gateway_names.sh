#!/usr/bin/env bash
# gateway_names.sh SRCDIR - "adding a gateway is adding a file and a line"
# holds only if nothing outside core/gateways/ names one (STYLE.md): fails
# when the code of a C file - comments aside, strings and identifiers
# included - names a gateway of the registry, except in core/gateways/, the
# simulator (platform/sim/ and its command firmware/cmd_sim.c), the demo's
# kiosk script (firmware/cmd_demo.c), and the tests and their vectors.
# Prints every occurrence with its file and line.
set -euo pipefail
SRC=${1:?usage: $0 SRCDIR}
cd "$SRC"
# The gateways: the .name of each table in core/gateways/.
names=$(grep -ho '^    \.name = "[^"]*",' core/gateways/*.c | sed 's/.*"\(.*\)".*/\1/' | sort -u)
[ -n "$names" ] || { echo "gateway_names: no gateway tables found in core/gateways" >&2; exit 1; }
[ "$(wc -w <<<"$names")" -ge 2 ] || { echo "gateway_names: found only: $names" >&2; exit 1; }
pattern=$(tr '\n' '|' <<<"$names" | sed 's/|$//')
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
    exit 1
fi
echo "gateway_names: no gateway named in $(wc -w <<<"$files") files outside core/gateways ($(tr '\n' ' ' <<<"$names"))"
