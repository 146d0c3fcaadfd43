#!/bin/sh
# srd-perf explains what is wrong, quickly: no plugin at the path, a library
# without ncclNetPlugin tables, a server that does not answer, bad options.
set -u
bin="${top_builddir:-.}/srd-perf"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# expect STATUS PATTERN -- command...: exit status and a message on stderr.
expect() {
  want=$1 pattern=$2
  shift 3
  timeout 30 "$@" > "$tmp/out" 2> "$tmp/err"
  rc=$?
  cat "$tmp/err"
  [ "$rc" -eq "$want" ] || fail "'$*' exited $rc, expected $want"
  grep -q -- "$pattern" "$tmp/err" || fail "'$*' did not say '$pattern'"
}

"$bin" --help | grep -q -- "--plugin PATH" || fail "--help lacks --plugin"
expect 2 "unknown option" -- "$bin" --frobnicate
expect 2 "bad value '99' for '--window': an integer from 1 to 32" -- "$bin" --window 99
# A bad port names the valid range, whichever way it is wrong.
for p in 0 65536 http; do
  expect 2 "bad value '$p' for '--port': an integer from 1 to 65535" -- "$bin" --port "$p"
done
expect 2 "bad value '0' for '--runs': an integer from 1 to 100" -- "$bin" --runs 0
expect 2 "bad value 'x' for '-t'\$" -- "$bin" -t x
expect 1 "cannot load plugin /nonexistent/libnccl-net-x.so" -- "$bin" --plugin /nonexistent/libnccl-net-x.so
libc=$(ldd "$bin" | awk '/libc\.so/ {print $3; exit}')
[ -n "$libc" ] || fail "cannot find libc to use as a library without plugin tables"
expect 1 "exports none of ncclNetPlugin_v12" -- "$bin" --plugin "$libc"

# A client whose server never comes: a clear error within the timeout.
port=$(( 20000 + $$ % 20000 ))
start=$(date +%s)
expect 1 "no srd-perf --server answered" -- "$bin" --raw --client 127.0.0.1 --port "$port" --timeout 2
[ $(( $(date +%s) - start )) -le 10 ] || fail "the client took too long to give up"
expect 1 "no client connected" -- "$bin" --raw --server --port "$port" --timeout 1

# A server that accepts the connection but never speaks.
if command -v python3 > /dev/null 2>&1; then
  python3 -c "import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', $port)); s.listen(1); open('$tmp/listening', 'w').close(); c,_=s.accept(); time.sleep(8)" &
  silent=$!
  # Until it listens (a fixed sleep lost that race on a loaded CI machine).
  i=0
  while [ ! -e "$tmp/listening" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
  [ -e "$tmp/listening" ] || fail "the silent server did not start listening"
  expect 1 "did not send" -- "$bin" --raw --client 127.0.0.1 --port "$port" --timeout 2
  kill "$silent" 2> /dev/null
  wait "$silent" 2> /dev/null
fi

# A server that stops answering mid-run (SIGSTOP): the client says so and
# exits within its timeout, and does not wait forever for the stopped child.
child_of() {
  for stat in /proc/[0-9]*/stat; do
    read -r pid _ _ ppid _ 2> /dev/null < "$stat" && [ "$ppid" = "$1" ] && echo "$pid" && return
  done
}
"$bin" --raw -b 64K -e 64K -n 100000000 -t bw --timeout 5 > "$tmp/stop.out" 2> "$tmp/stop.err" &
client=$!
i=0
while ! grep -q "bw_GB/s" "$tmp/stop.out" && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
grep -q "bw_GB/s" "$tmp/stop.out" || { cat "$tmp/stop.err"; fail "the run meant to be stopped did not start"; }
server=$(child_of $client)
[ -n "$server" ] || fail "no server process under the client"
kill -STOP "$server"
start=$(date +%s)
wait $client
rc=$?
took=$(( $(date +%s) - start ))
kill -CONT "$server" 2> /dev/null
kill "$server" 2> /dev/null
cat "$tmp/stop.err"
[ "$rc" -eq 1 ] || fail "a stopped server: the client exited $rc, expected 1"
grep -Eq "does not answer|did not" "$tmp/stop.err" || fail "a stopped server: no clear error"
[ "$took" -le 20 ] || fail "a stopped server: the client took ${took}s to give up (timeout 5 s)"

# Two machines, played on one: --server and --client over TCP.
port=$((port + 1))
"$bin" --raw --server --port "$port" --timeout 20 > "$tmp/server.out" 2>&1 &
server=$!
timeout 60 "$bin" --raw --client 127.0.0.1 --port "$port" -b 8 -e 64K -f 16 -n 10 --check > "$tmp/client.out" 2>&1 ||
  { cat "$tmp/client.out" "$tmp/server.out"; fail "--server/--client run failed"; }
wait "$server" || { cat "$tmp/server.out"; fail "--server exited non-zero"; }
cat "$tmp/client.out"
grep -q "64 KiB" "$tmp/client.out" || fail "--client printed no 64 KiB row"
echo "PASS"
