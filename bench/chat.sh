#!/usr/bin/env bash
# Chat fan-out: N clients in one room of examples/chat (hibernatable
# sockets, one SQL insert per message), one sender with W messages in
# flight; message latency (send -> arrival at each member) p50/p99, messages
# sent per second and frames delivered per second, on workerd and on
# cellhost in turn. Prints cellhost/workerd.
#   bash bench/chat.sh [clients] [messages] [window]
source "$(dirname "$0")/lib.sh"
clients=${1:-50}; messages=${2:-2000}; window=${3:-8}
workerd_config examples/chat chat ROOMS ChatRoom
run() { # name port
  wait_up "$2"
  node bench/chat-client.mjs "$2" 5 100 4 >/dev/null # warm-up
  echo "$1 $(node bench/chat-client.mjs "$2" "$clients" "$messages" "$window")" >> "$out/results"
}

tests/node_modules/.bin/workerd serve "$out/config.capnp" >/dev/null 2>&1 &
wpid=$!
run workerd "$wport"
kill $wpid; wait $wpid 2>/dev/null || true

RUST_LOG=warn target/release/cellhost run examples/chat --listen "127.0.0.1:$cport" --data "$out/cdata" >/dev/null 2>&1 &
cpid=$!
run cellhost "$cport"
kill $cpid; wait $cpid 2>/dev/null || true

field() { grep "^$1 " "$out/results" | cut -d' ' -f2- | node -e "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>console.log(JSON.parse(s)['$2']))"; }
echo "chat fan-out: $clients clients in one room, $messages messages, $window in flight, $(nproc) cores"
printf "%-9s %10s %12s %9s %9s %10s\n" runtime "msgs/s" "frames/s" "p50 ms" "p99 ms" "delivered"
for n in workerd cellhost; do
  printf "%-9s %10.0f %12.0f %9.2f %9.2f %10s\n" "$n" "$(field $n msgsPerSec)" "$(field $n framesPerSec)" \
    "$(field $n p50)" "$(field $n p99)" "$(field $n delivered)/$(field $n expected)"
done
r() { echo "$1/$2" | bc -l; }
printf "ratio cellhost/workerd: msgs/s %.2fx, p50 %.2fx, p99 %.2fx\n" \
  "$(r "$(field cellhost msgsPerSec)" "$(field workerd msgsPerSec)")" \
  "$(r "$(field cellhost p50)" "$(field workerd p50)")" \
  "$(r "$(field cellhost p99)" "$(field workerd p99)")"
