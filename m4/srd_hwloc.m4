# SRD_CHECK_HWLOC: hwloc 2 (the topology API changed in 2.0) through pkg-config.
AC_DEFUN([SRD_CHECK_HWLOC], [
  PKG_CHECK_MODULES([HWLOC], [hwloc >= 2.0], [],
    [AC_MSG_ERROR([hwloc 2.0 or newer is required: $HWLOC_PKG_ERRORS
Debian/Ubuntu: apt-get install libhwloc-dev])])
])
