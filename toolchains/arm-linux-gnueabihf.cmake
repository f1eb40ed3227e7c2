# Cross build for armhf boards (32-bit ARM, hardware float) against a private
# sysroot of Debian's armhf packages - not multiarch, see scripts/sysroot.sh:
#   scripts/deps.sh armhf          gcc-arm-linux-gnueabihf, qemu-user-static
#   scripts/sysroot.sh armhf       build/sysroot-armhf (no dpkg changes)
# `make cross-armhf` does both, then builds and runs the unit tests under
# qemu-arm-static (CMAKE_CROSSCOMPILING_EMULATOR).  PT_SYSROOT (environment or
# cache) points elsewhere.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-linux-gnueabihf-gcc)
set(CMAKE_LIBRARY_ARCHITECTURE arm-linux-gnueabihf)

if(NOT PT_SYSROOT)
  if(DEFINED ENV{PT_SYSROOT})
    set(PT_SYSROOT "$ENV{PT_SYSROOT}")
  else()
    get_filename_component(PT_SYSROOT "${CMAKE_CURRENT_LIST_DIR}/../build/sysroot-armhf" ABSOLUTE)
  endif()
endif()
set(PT_SYSROOT "${PT_SYSROOT}" CACHE PATH "armhf sysroot made by scripts/sysroot.sh")
# try_compile() projects re-read this file: hand them the same sysroot.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES PT_SYSROOT)
if(NOT EXISTS "${PT_SYSROOT}/usr/include/sqlite3.h")
  message(FATAL_ERROR "No armhf sysroot at ${PT_SYSROOT}: run scripts/sysroot.sh armhf "
                      "(or make cross-armhf)")
endif()
set(_pt_libdirs "${PT_SYSROOT}/usr/lib/arm-linux-gnueabihf" "${PT_SYSROOT}/lib/arm-linux-gnueabihf")

# The cross compiler keeps its own C library (/usr/arm-linux-gnueabihf); the
# sysroot only adds libraries, so it is a find root, not --sysroot.
set(CMAKE_FIND_ROOT_PATH "${PT_SYSROOT}" /usr/arm-linux-gnueabihf)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config sees only the sysroot's .pc files, and prefixes their paths.
set(ENV{PKG_CONFIG_DIR} "")
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_LIBDIR}
    "${PT_SYSROOT}/usr/lib/arm-linux-gnueabihf/pkgconfig:${PT_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${PT_SYSROOT}")

# Headers installed straight into /usr/include get no -I from pkg-config (it
# drops system directories); mbedTLS has no .pc at all.  The sysroot has no
# libc headers, so adding its include directories is safe.
set(CMAKE_C_FLAGS_INIT
    "-isystem ${PT_SYSROOT}/usr/include/arm-linux-gnueabihf -isystem ${PT_SYSROOT}/usr/include")
# libcurl's own dependencies (libssl3, libnghttp2, ...) are resolved by the
# linker from DT_NEEDED: tell it where they are.
set(_pt_link "")
foreach(d IN LISTS _pt_libdirs)
  string(APPEND _pt_link " -Wl,-rpath-link,${d}")
endforeach()
set(CMAKE_EXE_LINKER_FLAGS_INIT "${_pt_link}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${_pt_link}")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "${_pt_link}")

# The sysroot doubles as qemu's -L prefix: it links the cross C library and
# the armhf loader into its /lib (scripts/sysroot.sh).
find_program(PT_QEMU qemu-arm-static)
if(PT_QEMU)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${PT_QEMU} -L ${PT_SYSROOT})
endif()
