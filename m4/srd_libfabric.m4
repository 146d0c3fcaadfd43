# SRD_CHECK_LIBFABRIC: libfabric through pkg-config, at least the one minimum
# version the project supports, then the symbols that only newer releases
# have (probed, never copied from headers).
#
# The minimum is 1.17: the oldest release CI builds and tests (Debian 12's).
# README and srd-info state the same number through SRD_FI_MIN_MAJOR/MINOR.
AC_DEFUN([SRD_LIBFABRIC_MIN_MAJOR], [1])
AC_DEFUN([SRD_LIBFABRIC_MIN_MINOR], [17])
AC_DEFUN([SRD_CHECK_LIBFABRIC], [
  PKG_CHECK_MODULES([FABRIC], [libfabric >= SRD_LIBFABRIC_MIN_MAJOR.SRD_LIBFABRIC_MIN_MINOR], [],
    [AC_MSG_ERROR([libfabric SRD_LIBFABRIC_MIN_MAJOR.SRD_LIBFABRIC_MIN_MINOR or newer is required (the oldest release CI tests): $FABRIC_PKG_ERRORS
Debian/Ubuntu: apt-get install libfabric-dev; another installation: PKG_CONFIG_PATH=<prefix>/lib/pkgconfig])])
  AC_DEFINE([SRD_FI_MIN_MAJOR], [SRD_LIBFABRIC_MIN_MAJOR], [oldest supported libfabric, major])
  AC_DEFINE([SRD_FI_MIN_MINOR], [SRD_LIBFABRIC_MIN_MINOR], [oldest supported libfabric, minor])
  srd_save_CFLAGS=$CFLAGS
  srd_save_LIBS=$LIBS
  CFLAGS="$CFLAGS $FABRIC_CFLAGS"
  LIBS="$LIBS $FABRIC_LIBS"
  AC_CHECK_DECLS([FI_MR_DMABUF, FI_HMEM_CUDA, FI_OPT_CUDA_API_PERMITTED, FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES,
                  FI_OPT_EFA_RNR_RETRY, FI_OPT_EFA_EMULATED_WRITE, FI_OPT_EFA_EMULATED_READ, FI_OPT_MAX_MSG_SIZE,
                  FI_OPT_SHARED_MEMORY_PERMITTED], [], [], [[#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_ext.h>]])
  AC_CHECK_MEMBERS([struct fi_mr_attr.dmabuf], [], [], [[#include <rdma/fi_domain.h>]])
  CFLAGS=$srd_save_CFLAGS
  LIBS=$srd_save_LIBS
])
