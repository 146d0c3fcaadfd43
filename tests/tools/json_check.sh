# Sourced by the tool tests: json_check FILE validates one JSON document with
# our own validator, and with python3 too when it is installed.
json_check() {
  "${top_builddir:-.}/tests/tools/json_validate" < "$1" || return 1
  if command -v python3 > /dev/null 2>&1; then
    python3 -m json.tool "$1" > /dev/null || return 1
  fi
  return 0
}
