# SRD_CHECK_GTEST: GoogleTest for the unit tests. Optional by default (make
# check then runs only the functional tests, with a warning); --with-gtest=yes
# (CI) makes its absence an error, --without-gtest skips it.
AC_DEFUN([SRD_CHECK_GTEST], [
  AC_ARG_WITH([gtest], [AS_HELP_STRING([--with-gtest@<:@=yes|no|check@:>@],
              [GoogleTest for the unit tests: yes requires it (CI), default: use when found])],
              [], [with_gtest=check])
  have_gtest=no
  AS_IF([test "x$with_gtest" != xno],
        [PKG_CHECK_MODULES([GTEST], [gtest_main], [have_gtest=yes], [have_gtest=no])])
  AS_IF([test "x$have_gtest" = xno && test "x$with_gtest" = xyes],
        [AC_MSG_ERROR([--with-gtest=yes but GoogleTest (pkg-config gtest_main) was not found: $GTEST_PKG_ERRORS
Debian/Ubuntu: apt-get install libgtest-dev])])
  AS_IF([test "x$have_gtest" = xno && test "x$with_gtest" = xcheck],
        [AC_MSG_WARN([GoogleTest not found: make check runs only the functional tests])])
  AM_CONDITIONAL([HAVE_GTEST], [test "x$have_gtest" = xyes])
])
