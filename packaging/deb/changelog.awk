# changelog.awk - CHANGELOG.md (Keep a Changelog) -> a Debian changelog.
#
#   awk -v maintainer='Name <mail>' -f changelog.awk CHANGELOG.md > changelog
#
# The .deb is a native package (version 0.2.0, no Debian revision), so its
# /usr/share/doc/payterm/changelog.gz must be in Debian's format (lintian,
# Debian policy 12.7).  Each "## [X.Y.Z] - YYYY-MM-DD" section becomes an
# entry; its "### Added" and the like become "[ Added ]" lines, its
# "- item" bullets "* item" re-wrapped to 78 columns.  "## [Unreleased]" is
# left out.  POSIX awk only (mawk, BusyBox awk).

function flush(    words, n, i, line, first) {
    if (item == "")
        return
    n = split(item, words, /[ \t]+/)
    line = "  *"
    for (i = 1; i <= n; i++) {
        if (words[i] == "")
            continue
        if (length(line) + 1 + length(words[i]) > 78 && line != "  *" && line != "   ") {
            print line
            line = "   "
        }
        line = line " " words[i]
    }
    print line
    item = ""
}

# Day of the week of a date (Zeller's congruence, Gregorian calendar).
function weekday(y, m, d,    k, j, h) {
    if (m < 3) { m += 12; y-- }
    k = y % 100; j = int(y / 100)
    h = (d + int(13 * (m + 1) / 5) + k + int(k / 4) + int(j / 4) + 5 * j) % 7
    return substr("SatSunMonTueWedThuFri", h * 3 + 1, 3)
}

function trailer() {
    if (version == "")
        return
    flush()
    split(date, p, "-")
    months = "JanFebMarAprMayJunJulAugSepOctNovDec"
    printf "\n -- %s  %s, %s %s %s 00:00:00 +0000\n", maintainer,
        weekday(p[1] + 0, p[2] + 0, p[3] + 0), p[3], substr(months, (p[2] - 1) * 3 + 1, 3), p[1]
    version = ""
}

BEGIN {
    if (maintainer == "") {
        print "changelog.awk: -v maintainer='Name <mail>' is required" > "/dev/stderr"
        exit 1
    }
    entries = 0
}

/^## \[/ {
    trailer()
    v = $0; sub(/^## \[/, "", v); sub(/\].*/, "", v)
    if (v == "Unreleased" || $0 !~ / - [0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]/)
        next
    version = v
    date = $0; sub(/.* - /, "", date)
    if (entries++)
        print ""
    print "payterm (" version ") unstable; urgency=medium"
    print ""
    first_group = 1
    next
}
version == "" { next }

/^### / {
    flush()
    g = $0; sub(/^### /, "", g)
    if (!first_group)
        print ""
    first_group = 0
    print "  [ " g " ]"
    next
}
/^- / {
    flush()
    item = substr($0, 3)
    next
}
/^  [^ ]/ {
    if (item != "") { item = item " " substr($0, 3); next }
}
/^[ \t]*$/ { flush(); next }

END {
    if (version != "")
        trailer()
    if (entries == 0) {
        print "changelog.awk: no released version (## [X.Y.Z] - YYYY-MM-DD) found" > "/dev/stderr"
        exit 1
    }
}
