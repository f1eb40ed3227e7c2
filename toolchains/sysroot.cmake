# The part the cross toolchain files share: build against a private sysroot
# made by scripts/sysroot.sh from Debian's own packages for the target - not
# multiarch, nothing installed through dpkg (docs/cross.md).  The including
# file sets CMAKE_SYSTEM_PROCESSOR and
#   PT_TRIPLET    GNU triplet: compiler prefix, /usr/<triplet> (the cross C
#                 library), lib/<triplet> inside the sysroot
#   PT_DEB_ARCH   Debian architecture: scripts/sysroot.sh's argument, and the
#                 default sysroot build/sysroot-<arch>
#   PT_QEMU_NAME  the qemu-user binary that runs the unit tests
# PT_SYSROOT (environment or cache) points at another sysroot.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_C_COMPILER ${PT_TRIPLET}-gcc)
set(CMAKE_LIBRARY_ARCHITECTURE ${PT_TRIPLET})

if(NOT PT_SYSROOT)
  if(DEFINED ENV{PT_SYSROOT})
    set(PT_SYSROOT "$ENV{PT_SYSROOT}")
  else()
    get_filename_component(PT_SYSROOT "${CMAKE_CURRENT_LIST_DIR}/../build/sysroot-${PT_DEB_ARCH}"
                           ABSOLUTE)
  endif()
endif()
set(PT_SYSROOT "${PT_SYSROOT}" CACHE PATH "${PT_DEB_ARCH} sysroot made by scripts/sysroot.sh")
# try_compile() projects re-read the toolchain file: hand them the same sysroot.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES PT_SYSROOT)
if(NOT EXISTS "${PT_SYSROOT}/usr/include/sqlite3.h")
  message(FATAL_ERROR "No ${PT_DEB_ARCH} sysroot at ${PT_SYSROOT}: run scripts/sysroot.sh "
                      "${PT_DEB_ARCH} (make cross-aarch64 and cross-armhf do)")
endif()

# --sysroot, so that the directories Debian's cross gcc searches after its
# own - /usr/include/<triplet>, /usr/include, /lib/<triplet>,
# /usr/lib/<triplet>, /usr/lib - mean the sysroot's and not the build
# machine's: on a machine that still has :arm64 packages from the multiarch
# days they would otherwise quietly lend the build any header or library the
# sysroot lacks.  The C library is not affected: gcc finds it in its tool
# directory (/usr/<triplet>/include and lib, from libc6-dev-<arch>-cross)
# whatever the sysroot.
set(CMAKE_SYSROOT "${PT_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH "${PT_SYSROOT}" /usr/${PT_TRIPLET})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config sees only the sysroot's .pc files, and prefixes their paths.
set(ENV{PKG_CONFIG_DIR} "")
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_LIBDIR}
    "${PT_SYSROOT}/usr/lib/${PT_TRIPLET}/pkgconfig:${PT_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${PT_SYSROOT}")

# The sysroot doubles as qemu's -L prefix: scripts/sysroot.sh links the cross
# C library and the target's dynamic loader into its /lib.
find_program(PT_QEMU ${PT_QEMU_NAME})
if(PT_QEMU)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${PT_QEMU} -L ${PT_SYSROOT})
endif()
