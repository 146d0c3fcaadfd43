# SRD_COMPILER_FLAGS: warnings (--enable-werror makes them errors) and the
# sanitizer builds (--enable-sanitizers: ASan+UBSan; --enable-tsan).
AC_DEFUN([SRD_COMPILER_FLAGS], [
  AC_ARG_ENABLE([werror], [AS_HELP_STRING([--enable-werror], [treat warnings as errors (CI)])],
                [], [enable_werror=no])
  AC_ARG_ENABLE([sanitizers], [AS_HELP_STRING([--enable-sanitizers], [build with AddressSanitizer and UBSan])],
                [], [enable_sanitizers=no])
  AC_ARG_ENABLE([tsan], [AS_HELP_STRING([--enable-tsan], [build with ThreadSanitizer])], [], [enable_tsan=no])
  AS_IF([test "x$enable_sanitizers" = xyes && test "x$enable_tsan" = xyes],
        [AC_MSG_ERROR([--enable-sanitizers and --enable-tsan cannot be combined])])
  WARN_CFLAGS="-Wall -Wextra -Wshadow -Wformat=2 -Wno-unused-parameter -Wno-missing-field-initializers -Wno-format-truncation"
  AS_IF([test "x$enable_werror" = xyes], [WARN_CFLAGS="$WARN_CFLAGS -Werror"])
  SAN_FLAGS=
  AS_IF([test "x$enable_sanitizers" = xyes],
        [SAN_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"])
  AS_IF([test "x$enable_tsan" = xyes], [SAN_FLAGS="-fsanitize=thread -fno-omit-frame-pointer"])
  AC_ARG_ENABLE([hop-stats], [AS_HELP_STRING([--enable-hop-stats],
                [benchmark build: count where a message's time goes on the proxy path (printed at exit)])],
                [], [enable_hop_stats=no])
  dnl On the command line, not in config.h: every source sees it, whether it includes config.h or not.
  HOP_STATS_CPPFLAGS=
  AS_IF([test "x$enable_hop_stats" = xyes], [HOP_STATS_CPPFLAGS=-DSRD_HOP_STATS])
  AC_SUBST([HOP_STATS_CPPFLAGS])
  AM_CONDITIONAL([SANITIZED], [test "x$enable_sanitizers" = xyes || test "x$enable_tsan" = xyes])
  AC_SUBST([WARN_CFLAGS])
  AC_SUBST([SAN_FLAGS])
])
