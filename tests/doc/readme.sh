#!/bin/sh
# README.md's and doc/'s claims hold for this tree (tests/doc/readme_claims.py).
command -v python3 > /dev/null 2>&1 || { echo "SKIP: python3 missing"; exit 77; }
exec python3 "${top_srcdir:-.}/tests/doc/readme_claims.py" "${top_srcdir:-.}" "${top_builddir:-.}"
