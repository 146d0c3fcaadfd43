# SRD_CHECK_CUDA: CUDA headers, optional; the plugin never links CUDA (it is
# loaded with dlopen at run time), so only cuda.h is looked for.
# --with-cuda=PATH insists, --without-cuda skips, default: /usr/local/cuda if there.
AC_DEFUN([SRD_CHECK_CUDA], [
  AC_ARG_WITH([cuda], [AS_HELP_STRING([--with-cuda@<:@=PATH@:>@],
              [CUDA toolkit for its headers (default: /usr/local/cuda when present)])],
              [], [with_cuda=check])
  have_cuda=no
  AS_IF([test "x$with_cuda" != xno], [
    srd_cuda_dir=$with_cuda
    AS_IF([test "x$with_cuda" = xyes || test "x$with_cuda" = xcheck], [srd_cuda_dir=/usr/local/cuda])
    AC_MSG_CHECKING([for cuda.h under $srd_cuda_dir/include])
    AS_IF([test -r "$srd_cuda_dir/include/cuda.h"], [have_cuda=yes; CUDA_CFLAGS="-I$srd_cuda_dir/include"])
    AC_MSG_RESULT([$have_cuda])
    AS_IF([test "x$have_cuda" = xno && test "x$with_cuda" != xcheck],
          [AC_MSG_ERROR([cuda.h not found under $srd_cuda_dir/include])])
  ])
  AS_IF([test "x$have_cuda" = xyes], [AC_DEFINE([HAVE_CUDA_H], [1], [cuda.h is available for types])])
  AC_SUBST([CUDA_CFLAGS])
])
