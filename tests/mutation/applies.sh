#!/bin/sh
# Every planted bug in tests/mutation/mutations still applies to the source:
# a change to code that one names fails here at once, not at the next full
# planted-bug run (CONTRIBUTING.md: Planted bugs).
command -v python3 >/dev/null 2>&1 || { echo "applies: python3 is needed" >&2; exit 77; }
exec python3 "${top_srcdir:-.}/tests/mutation/mutate.py" --applies
