# Cross build for armhf boards (32-bit ARM, hardware float) against a private
# sysroot of Debian's armhf packages - not multiarch, see scripts/sysroot.sh:
#   scripts/deps.sh armhf          gcc-arm-linux-gnueabihf, libc6-dev-armhf-cross,
#                                  qemu-user-static
#   scripts/sysroot.sh armhf       build/sysroot-armhf (no dpkg changes)
# `make cross-armhf` does both, then builds and runs the unit tests under
# qemu-arm-static (CMAKE_CROSSCOMPILING_EMULATOR).  toolchains/sysroot.cmake
# does the work.
set(CMAKE_SYSTEM_PROCESSOR arm)
set(PT_TRIPLET arm-linux-gnueabihf)
set(PT_DEB_ARCH armhf)
set(PT_QEMU_NAME qemu-arm-static)
include(${CMAKE_CURRENT_LIST_DIR}/sysroot.cmake)
