# Thin front door over CMake presets.  Every target installs what is missing
# first (as root; otherwise it prints the one apt-get line and stops).
#
#   make demo    build, start the simulator and the daemon, play a kiosk session
#   make test    build and run the whole ctest suite
#   make run     the daemon in simulation mode, in the foreground
#   make bench   benchmarks: table on stdout, JSON in build/bench/results.json
#   make races   the long race loops (a cancel against its own charge, 210
#                races against the simulator's ledger; SPEC 18)
#   make crash   power cuts, torn writes and I/O errors under the store, walvfs
#                on and off (docs/crash.md); CRASH_ONLY=ID replays one point,
#                CRASH_WALVFS=on|off one setting, CRASH_KEEP=1 keeps its files
#   make cross   aarch64 and armhf cross builds (unit tests under qemu)
#   make cross-musl  the board build on musl: static, its libraries built with
#                musl-gcc from Debian's source packages (cached); unit tests and
#                a few HTTP suites run on it
#   make deb     build/payterm_VERSION_ARCH.deb (SPEC 14; lintian-checked)
#   make dist    build/payterm-VERSION.tar.gz of HEAD, the same bytes every time
#                (DIST_REF=vX.Y.Z for a release; its sha256 for Buildroot's .hash)
#   make asan    the test suite under AddressSanitizer + UBSan
#   make fuzz    short libFuzzer runs of every parser
#   make format-check  every C file as .clang-format lays it out (CI)
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build test races crash asan bench cross cross-aarch64 cross-armhf cross-musl deb dist demo run fuzz format format-check clean screenshot

all: build

deps:
	@scripts/deps.sh base

build: deps
	@cmake --preset dev >/dev/null
	@cmake --build --preset dev -j $(JOBS)

test: build
	ctest --preset dev

# make test runs two rounds of each race loop (28 races); this runs 15 (210).
races: build
	PT_CANCEL_RACE_ROUNDS=15 ctest --preset dev -R 'integration\.sync\.cancel_race$$' --output-on-failure

# Builds only what it runs (the store and the harness), on the dev preset.
crash: deps
	@cmake --preset dev >/dev/null
	@cmake --build --preset dev -j $(JOBS) --target pt_crash
	build/dev/tests/crash/pt_crash --jobs $(JOBS) $(if $(CRASH_ONLY),--only $(CRASH_ONLY)) \
	    $(if $(CRASH_WALVFS),--walvfs $(CRASH_WALVFS)) $(if $(CRASH_KEEP),--keep)

asan: deps
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan -j $(JOBS)
	ctest --preset asan

bench: build
	@scripts/deps.sh bench
	@cmake --preset release >/dev/null
	@cmake --build --preset release -j $(JOBS)
	@mkdir -p build/bench
	build/dev/tests/bench/pt_bench --dir build/bench --json build/bench/results.json

cross: cross-aarch64 cross-armhf

cross-aarch64:
	@scripts/deps.sh cross
	@scripts/sysroot.sh arm64
	@cmake --preset aarch64 >/dev/null
	@cmake --build --preset aarch64 -j $(JOBS)
	ctest --preset aarch64

cross-armhf:
	@scripts/deps.sh armhf
	@scripts/sysroot.sh armhf
	@cmake --preset armhf >/dev/null
	@cmake --build --preset armhf -j $(JOBS)
	ctest --preset armhf

# SPEC 14: the board build is a musl build.  scripts/musl.sh builds SQLite,
# mbed TLS, libcurl, cJSON, libmicrohttpd and cmocka with musl-gcc from
# Debian's source packages into a prefix it caches outside the tree (it
# prints the prefix; a new one, after a Debian update, reconfigures from
# scratch); payterm is linked statically against it, and the unit tests and
# the HTTP suites labelled musl (the daemon at 128 KiB thread stacks) run on it.
cross-musl:
	@scripts/deps.sh musl
	@prefix=$$(JOBS=$(JOBS) scripts/musl.sh) && \
	    fresh=; [ "$$(cat build/musl/.prefix 2>/dev/null)" = "$$prefix" ] || fresh=--fresh; \
	    cmake --preset musl $$fresh -DPT_MUSL_PREFIX="$$prefix" >/dev/null && \
	    echo "$$prefix" >build/musl/.prefix
	@cmake --build --preset musl -j $(JOBS)
	ctest --preset musl
	@f=build/musl/firmware/payterm; \
	    if readelf -l $$f | grep -q 'program interpreter'; then \
	        echo "make cross-musl: $$f is not static" >&2; exit 1; fi; \
	    strip -o $$f.stripped $$f && \
	    echo "make cross-musl: $$f ($$($$f version)), static, $$(stat -c %s $$f.stripped) bytes stripped"

# The .deb (SPEC 14): the board build (no simulator), packaged with CPack.
deb: deps
	@scripts/deps.sh deb
	@cmake --preset deb >/dev/null
	@cmake --build --preset deb -j $(JOBS)
	@rm -f build/deb/payterm_*.deb build/payterm_*.deb
	@cd build/deb && cpack -G DEB
	@cp build/deb/payterm_*.deb build/
	@f=$$(ls build/payterm_*.deb) && lintian --fail-on error "$$f" && \
	    echo "make deb: $$f ($$(du -k "$$f" | cut -f1) KiB; lintian: no errors)"

# The release tarball (SPEC 14): git archive of a commit, gzip -n; prints the
# line for firmware/board/buildroot/package/payterm/payterm.hash.
dist:
	@scripts/dist.sh --hash $(or $(DIST_REF),HEAD) build

demo: build
	build/dev/firmware/payterm demo --dir build/demo

run: build
	@scripts/run.sh

# docs/operator-page.png: the operator page in headless Chromium, taken by its
# own browser test (tests/integration/sync/operator_page.sh) against a daemon
# and the simulator - refreshed by this target, never by hand.
screenshot: build
	OPERATOR_PAGE_PNG=$(CURDIR)/docs/operator-page.png PAYTERM_THREAD_STACK_KIB=128 \
	    bash tests/integration/sync/operator_page.sh $(CURDIR)/build/dev/firmware/payterm

fuzz:
	@scripts/deps.sh base fuzz
	@scripts/fuzz.sh

format:
	@scripts/deps.sh lint
	clang-format -i $$(git ls-files '*.c' '*.h')

# Fails (and lists the files) when a C file differs from .clang-format's layout.
format-check:
	@scripts/deps.sh lint
	@bad=$$(for f in $$(git ls-files '*.c' '*.h'); do \
	    clang-format --dry-run --Werror "$$f" >/dev/null 2>&1 || echo "$$f"; done); \
	if [ -n "$$bad" ]; then echo "not formatted (make format):"; echo "$$bad"; exit 1; fi; \
	echo "format-check: every C file as .clang-format lays it out"

clean:
	rm -rf build
