#!/bin/sh
# dist.sh - the release tarball, made the same way every time (SPEC 14).
#
# usage: scripts/dist.sh [--hash] [REF] [OUTDIR]
#   REF     a commit or tag (default HEAD); the tarball holds REF's tree,
#           committed files only, and is named after REF's VERSION file:
#           OUTDIR/payterm-VERSION.tar.gz (OUTDIR default build)
#   --hash  also print the line for the Buildroot package's .hash file
#
# `git archive` of the commit: every file's mtime is the commit's time, the
# owner root, modes 0644/0755 whatever git's tar.umask, line ends as
# committed whatever core.autocrlf, the commit id in the pax header,
# the top directory payterm-VERSION/; then gzip -n (no name, no time in the
# gzip header).  The same commit therefore gives the same bytes on any
# machine and at any time, which is what lets a hash recorded once check a
# tarball made later (docs/buildroot.md, "Releases").
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
print_hash=0
if [ "${1:-}" = --hash ]; then
    print_hash=1
    shift
fi
ref=${1:-HEAD}
out=${2:-$top/build}

git -C "$top" rev-parse -q --verify "$ref^{commit}" >/dev/null || {
    echo "dist.sh: '$ref' is not a commit of this repository" >&2
    exit 2
}
commit=$(git -C "$top" rev-parse "$ref^{commit}")
version=$(git -C "$top" show "$commit:VERSION" 2>/dev/null | head -n 1)
case "$version" in
[0-9]*.[0-9]*.[0-9]*) ;;
*) echo "dist.sh: $ref has no VERSION file holding MAJOR.MINOR.PATCH" >&2; exit 1 ;;
esac
name=payterm-$version
mkdir -p "$out"
tarball=$out/$name.tar.gz

# Committed files only: say so when the work tree has more (a release is
# made from a clean checkout of its tag).
if [ "$ref" = HEAD ] && [ -n "$(git -C "$top" status --porcelain --untracked-files=no)" ]; then
    echo "dist.sh: note: uncommitted changes are not in the tarball (it holds HEAD)" >&2
fi

# gzip's own name and time would make two runs differ (-n leaves them out).
git -C "$top" -c tar.umask=0022 -c core.autocrlf=false archive --format=tar --prefix="$name/" "$commit" | gzip -9n >"$tarball.tmp"
mv "$tarball.tmp" "$tarball"
sum=$(sha256sum "$tarball" | cut -d' ' -f1)

tag=$(git -C "$top" tag --points-at "$commit" -l "v$version" | head -n 1)
if [ -n "$tag" ]; then
    echo "dist.sh: $tarball: release $version (tag $tag, commit $commit)" >&2
else
    echo "dist.sh: $tarball: commit $commit (not tagged v$version: not a release)" >&2
fi
if [ "$print_hash" = 1 ]; then
    echo "# $name.tar.gz: make dist of ${tag:-commit} $commit"
    echo "sha256  $sum  $name.tar.gz"
else
    echo "sha256  $sum  $name.tar.gz"
fi
