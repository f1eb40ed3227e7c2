# Cross build for aarch64 boards (64-bit ARM) against a private sysroot of
# Debian's arm64 packages - not multiarch, see scripts/sysroot.sh:
#   scripts/deps.sh cross          gcc-aarch64-linux-gnu, libc6-dev-arm64-cross,
#                                  qemu-user-static
#   scripts/sysroot.sh arm64       build/sysroot-arm64 (no dpkg changes)
# `make cross-aarch64` does both, then builds and runs the unit tests under
# qemu-aarch64-static (CMAKE_CROSSCOMPILING_EMULATOR).  toolchains/sysroot.cmake
# does the work.
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(PT_TRIPLET aarch64-linux-gnu)
set(PT_DEB_ARCH arm64)
set(PT_QEMU_NAME qemu-aarch64-static)
include(${CMAKE_CURRENT_LIST_DIR}/sysroot.cmake)
