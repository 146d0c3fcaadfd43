#!/bin/sh
# doc/aws.md's YAML and Dockerfile stay well-formed (tests/doc/aws_examples.py).
command -v python3 > /dev/null 2>&1 || { echo "SKIP: python3 missing"; exit 77; }
exec python3 "${top_srcdir:-.}/tests/doc/aws_examples.py" "${top_srcdir:-.}/doc/aws.md"
