# The board build on musl (SPEC 14): payterm and its libraries built with
# musl-gcc (Debian's musl-tools) and linked statically - the C library a
# Buildroot board has by default, here for x86_64, where the unit tests run
# as they are.  The libraries (SQLite, mbed TLS, libcurl with mbed TLS,
# cJSON, libmicrohttpd, cmocka for the tests) come from Debian's source
# packages, built by scripts/musl.sh into one prefix:
#   PT_MUSL_PREFIX   that prefix (environment or cache; `make cross-musl`
#                    passes what scripts/musl.sh prints)
# Only the prefix is searched for headers, libraries and .pc files: nothing
# of the machine's glibc builds can slip in.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_C_COMPILER musl-gcc)

if(NOT PT_MUSL_PREFIX AND DEFINED ENV{PT_MUSL_PREFIX})
  set(PT_MUSL_PREFIX "$ENV{PT_MUSL_PREFIX}")
endif()
set(PT_MUSL_PREFIX "${PT_MUSL_PREFIX}" CACHE PATH "libraries built with musl-gcc by scripts/musl.sh")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES PT_MUSL_PREFIX)
if(NOT EXISTS "${PT_MUSL_PREFIX}/include/sqlite3.h")
  message(FATAL_ERROR "No musl libraries at '${PT_MUSL_PREFIX}': run scripts/musl.sh and pass "
                      "the prefix it prints as PT_MUSL_PREFIX (make cross-musl does)")
endif()

set(CMAKE_FIND_ROOT_PATH "${PT_MUSL_PREFIX}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_FIND_LIBRARY_SUFFIXES .a)
set(ENV{PKG_CONFIG_DIR} "")
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_LIBDIR} "${PT_MUSL_PREFIX}/lib/pkgconfig")

# One static binary.  The libraries' .pc files list what each needs
# (libcurl: mbed TLS), but not in an order a static link can use whatever
# order CMake puts them in: one group resolves them among themselves.
# scripts/musl.sh builds the libraries with every function and object in a
# section of its own, and the linker drops what nothing calls: about 200 KiB
# of the libraries that payterm never reaches (payterm's own code has none).
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static -Wl,--gc-sections")
set(CMAKE_C_LINK_EXECUTABLE
    "<CMAKE_C_COMPILER> <FLAGS> <CMAKE_C_LINK_FLAGS> <LINK_FLAGS> <OBJECTS> -o <TARGET> -Wl,--start-group <LINK_LIBRARIES> -Wl,--end-group")
