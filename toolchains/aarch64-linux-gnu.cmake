# Cross build for aarch64 boards with Debian's multiarch packages:
#   dpkg --add-architecture arm64
#   apt-get install gcc-aarch64-linux-gnu libsqlite3-dev:arm64 libmbedtls-dev:arm64 \
#     libcurl4-openssl-dev:arm64 libcjson-dev:arm64 libmicrohttpd-dev:arm64 libcmocka-dev:arm64
# Tests run under qemu-aarch64-static (CMAKE_CROSSCOMPILING_EMULATOR).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# pkg-config must see the target's .pc files, not the build machine's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_SYSROOT_DIR} /)
find_program(PT_QEMU qemu-aarch64-static)
if(PT_QEMU)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${PT_QEMU} -L /usr/aarch64-linux-gnu)
endif()
