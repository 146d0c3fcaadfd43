# SRD_CHECK_EFA_EMULATOR: --with-efa-emulator=PREFIX names what
# tests/efa/build-libfabric.sh built (libfabric with efa over the emulated
# EFA device).  The plugin then builds against that libfabric (its
# pkg-config file comes first) and make check adds the emulator's own tests
# and the functional suite over efa (tests/efa/efa-suite.sh).  A test
# fixture only: nothing of it is linked into the plugin or installed.
AC_DEFUN([SRD_CHECK_EFA_EMULATOR], [
  AC_ARG_WITH([efa-emulator], [AS_HELP_STRING([--with-efa-emulator=PREFIX],
              [run the tests over the emulated EFA device built by tests/efa/build-libfabric.sh into PREFIX])],
              [], [with_efa_emulator=no])
  EFA_EMU_PREFIX=
  AS_IF([test "x$with_efa_emulator" != xno], [
    AS_IF([test "x$with_efa_emulator" = xyes],
          [AC_MSG_ERROR([--with-efa-emulator needs the PREFIX that tests/efa/build-libfabric.sh built])])
    EFA_EMU_PREFIX=`cd "$with_efa_emulator" 2>/dev/null && pwd`
    for f in lib/pkgconfig/libfabric.pc emu/lib/libibverbs.so.1 emu/lib/libefa.so.1 \
             rdma/usr/include/infiniband/efadv.h bin/fi_info; do
      AS_IF([test -z "$EFA_EMU_PREFIX" || test ! -e "$EFA_EMU_PREFIX/$f"],
            [AC_MSG_ERROR([--with-efa-emulator=$with_efa_emulator: no $f there; build it with tests/efa/build-libfabric.sh TARBALL PREFIX])])
    done
    PKG_CONFIG_PATH="$EFA_EMU_PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    export PKG_CONFIG_PATH
    # That libfabric needs the emulated libefa (efadv_query_mr@EFA_1.3); a
    # program linking it would have ld check its dependencies against the
    # system's rdma-core.  They resolve at run time (LD_LIBRARY_PATH).
    LDFLAGS="$LDFLAGS -Wl,--allow-shlib-undefined"
  ])
  AC_SUBST([EFA_EMU_PREFIX])
  AM_CONDITIONAL([EFA_EMULATOR], [test -n "$EFA_EMU_PREFIX"])
])
