# Cross build for armhf boards with Debian's multiarch packages:
#   dpkg --add-architecture armhf
#   apt-get install gcc-arm-linux-gnueabihf libsqlite3-dev:armhf libmbedtls-dev:armhf \
#     libcurl4-openssl-dev:armhf libcjson-dev:armhf libmicrohttpd-dev:armhf libcmocka-dev:armhf
# Tests run under qemu-arm-static (CMAKE_CROSSCOMPILING_EMULATOR).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-linux-gnueabihf-gcc)
set(CMAKE_FIND_ROOT_PATH /usr/arm-linux-gnueabihf /usr/lib/arm-linux-gnueabihf)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_LIBRARY_ARCHITECTURE arm-linux-gnueabihf)
# pkg-config must see the target's .pc files, not the build machine's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/arm-linux-gnueabihf/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_SYSROOT_DIR} /)
find_program(PT_QEMU qemu-arm-static)
if(PT_QEMU)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${PT_QEMU} -L /usr/arm-linux-gnueabihf)
endif()
