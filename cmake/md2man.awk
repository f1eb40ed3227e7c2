# md2man.awk - turns the man page sources in docs/man/*.md into troff (man(7)).
#
# Run by the build (cmake/manpages.cmake) with POSIX awk (mawk, gawk, BusyBox
# awk): nothing beyond the base build dependencies, no pandoc, no python.
#
#   awk -v version=0.2.0 -v date=2026-12-01 -f md2man.awk payterm.8.md > payterm.8
#
# The sources use a small Markdown subset, chosen so that they read well as
# plain text and on a forge's web page:
#
#   # NAME SECTION - one line     first line: .TH and the NAME section
#   ## HEADING                    .SH (a section; written upper case)
#   ### Heading                   .SS (a subsection)
#   text lines                    a filled paragraph; a blank line ends it
#   * item  /  - item             a bullet list item (continued by indented lines)
#   `term`                        a line followed by ": definition" lines is a
#   : definition                  tagged paragraph (.TP); further lines of the
#     more text                   definition are indented by two spaces; a line
#                                 ":" alone starts a second paragraph in it
#   ```  ...  ```                 a verbatim block (no filling, no markup)
#   `code`  **bold**  *italic*    inline: code and bold set in bold, italic in
#                                 italic; inside `code` a "-" is a minus sign
#   @VERSION@  @DATE@             replaced by -v version / -v date
#
# Anything else is text.  troff's own syntax never leaks through: backslashes
# are escaped and a line never starts with "." or "'".

function esc(s) {
    gsub(/\\/, "\\e", s)
    return s
}

# Inline markup of one line of text.
function inline(s,    out, i, c, n, code, bold, ital, rest) {
    gsub(/@VERSION@/, version, s)
    gsub(/@DATE@/, date, s)
    s = esc(s)
    out = ""
    code = 0; bold = 0; ital = 0
    n = length(s)
    for (i = 1; i <= n; i++) {
        c = substr(s, i, 1)
        if (c == "`") {
            code = !code
            out = out (code ? "\\fB" : "\\fR")
            continue
        }
        if (code) {
            out = out (c == "-" ? "\\-" : c)
            continue
        }
        if (substr(s, i, 2) == "**") {
            rest = substr(s, i + 2)
            if (bold || index(rest, "**")) {
                bold = !bold
                out = out (bold ? "\\fB" : "\\fR")
                i++
                continue
            }
        }
        if (c == "*") {
            rest = substr(s, i + 1)
            if (ital || (index(rest, "*") && substr(rest, 1, 1) != " ")) {
                ital = !ital
                out = out (ital ? "\\fI" : "\\fR")
                continue
            }
        }
        out = out c
    }
    if (code || bold || ital)
        out = out "\\fR"
    return out
}

# A line of filled text: no leading blanks (troff would break there), no
# leading control character.
function text(s) {
    sub(/^[ \t]+/, "", s)
    s = inline(s)
    if (s ~ /^[.']/)
        s = "\\&" s
    print s
}

function upper(s) { return toupper(s) }

function manual(sec) {
    if (sec == "1") return "User Commands"
    if (sec == "5") return "File Formats Manual"
    if (sec == "8") return "System Manager's Manual"
    return "Miscellaneous"
}

# Ends whatever block is open before a new one starts.
function close_block() {
    if (inlist) { print ".RE"; inlist = 0 }
    state = ""
}

BEGIN {
    state = ""      # "", "para", "item", "def"
    inlist = 0
    verbatim = 0
    pending_term = ""
    if (version == "") version = "unknown"
    if (date == "") date = "unknown"
}

# Verbatim blocks first: nothing inside them is markup.
/^```/ {
    if (!verbatim) {
        if (pending_term != "") { close_block(); print ".PP"; text(pending_term); pending_term = "" }
        close_block()
        print ".PP"
        print ".RS 4"
        print ".nf"
        verbatim = 1
    } else {
        print ".fi"
        print ".RE"
        verbatim = 0
        state = ""
    }
    next
}
verbatim {
    line = $0
    gsub(/@VERSION@/, version, line)
    line = esc(line)
    if (line ~ /^[.']/)
        line = "\\&" line
    print line
    next
}

NR == 1 {
    if ($0 !~ /^# [^ ]+ [0-9] - /) {
        print "md2man: " FILENAME ": the first line must be '# NAME SECTION - description'" > "/dev/stderr"
        exit 1
    }
    name = $2; sec = $3
    desc = $0
    sub(/^# [^ ]+ [0-9] - /, "", desc)
    print ".\\\" Generated from docs/man/" name "." sec ".md by cmake/md2man.awk; do not edit."
    printf ".TH %s %s %s \"payterm %s\" \"%s\"\n", upper(name), sec, date, version, manual(sec)
    # No hyphenation, ragged right: option and key names stay whole.
    print ".nh"
    print ".ad l"
    print ".SH NAME"
    print name " \\- " inline(desc)
    next
}

# A definition line: the previous line (held back) was its term.
/^:( |$)/ {
    d = $0
    sub(/^: ?/, "", d)
    if (pending_term != "") {
        close_block()
        print ".TP"
        text(pending_term)
        pending_term = ""
        state = "def"
        if (d != "") text(d)
        next
    }
    if (state == "def") {
        if (d == "") { print ".IP"; next }
        text(d)
        next
    }
}

# A line held back as a possible term that turned out to be text.
pending_term != "" {
    close_block()
    print ".PP"
    text(pending_term)
    pending_term = ""
    state = "para"
}

/^## / {
    close_block()
    h = $0; sub(/^## /, "", h)
    print ".SH " inline(upper(h))
    next
}
/^### / {
    close_block()
    h = $0; sub(/^### /, "", h)
    print ".SS " inline(h)
    next
}

/^[ \t]*$/ {
    # A blank line ends a paragraph or list item, not a definition's list
    # of items: a definition continues while its lines stay indented.
    if (state == "item" || state == "para") state = "ended-" state
    else if (state == "def") state = "ended-def"
    next
}

/^[*-] / {
    if (state != "item" && state != "ended-item") {
        if (state == "def" || state == "ended-def") { print ".RS"; inlist = 1 }
        else close_block()
    }
    it = $0; sub(/^[*-] /, "", it)
    print ".IP \\(bu 2"
    text(it)
    state = "item"
    next
}

# Indented lines continue a list item or a definition.
/^  / {
    if (state == "item" || state == "def") { text($0); next }
    if (state == "ended-def") { print ".IP"; text($0); state = "def"; next }
}

{
    if (state == "para" || state == "item") { text($0); next }
    # Hold the line back: if the next one starts with ":", it is a term.
    if (state == "ended-def" || state == "def") close_block()
    if (state == "ended-item") close_block()
    pending_term = $0
    state = "held"
    next
}

END {
    if (pending_term != "") { close_block(); print ".PP"; text(pending_term) }
    close_block()
    if (verbatim) {
        print "md2man: " FILENAME ": a ``` block is not closed" > "/dev/stderr"
        exit 1
    }
}
