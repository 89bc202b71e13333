#!/bin/sh
# Repeats rrddmma-perf's sweep interop cases against perftest, both roles,
# and counts failures; run once in the SoftRoCE VM (not part of CI):
#   cargo xtask vm -- sh tests/perftest/sweep_loop.sh RUNS target/release/rrddmma-perf [SECS]
# SECS (optional): start no round after that many seconds (TCG is slow:
# ib_read_bw -a always sweeps to 8 MiB, about 30 s a run there).
# Cases per round: ib_read_bw -a client -> rrddmma-perf read bw -a server and
# the reverse, ib_atomic_bw client -> rrddmma-perf atomic bw server and the
# reverse (perftest with -F, as the device checks run it), and a control:
# ib_read_bw -a without -F, which exits with "Can't produce a report" when
# its CPU-frequency estimate fails (TCG), leaving our server at its closing
# handshake with "the peer closed the connection". The control runs every
# CONTROL_EVERY rounds (default 5).
RUNS=${1:-50}
ME=${2:-target/release/rrddmma-perf}
SECS=${3:-0}
CONTROL_EVERY=${CONTROL_EVERY:-5}
START=$(date +%s)
N=5
D="$RRDDMMA_TEST_DEVICE"; P=/sys/class/infiniband/$D/ports/1; X=
for t in $P/gid_attrs/types/*; do i=${t##*/}; [ "$(cat $t 2>/dev/null)" = 'RoCE v2' ] || continue
  case $(cat $P/gids/$i) in 0000:0000:0000:0000:0000:ffff:*) X=$i; break;; esac; [ -n "$X" ] || X=$i; done
X=${X:-0}
DEV="-d $D -x $X"
PORT=19000
# pair NAME SERVER CLIENT: runs both, prints one verdict line.
pair() {
  name=$1; server=$2; client=$3
  PORT=$((PORT + 1))
  L=$(mktemp); C=$(mktemp)
  timeout 330 $server -p $PORT > $L 2>&1 & S=$!
  for i in $(seq 200); do ss -ltn | grep -q ":$PORT " && break; sleep 0.1; done
  timeout 300 $client -p $PORT 127.0.0.1 > $C 2>&1; crc=$?
  wait $S; src=$?
  est=$(cat $L $C | grep -c 'Correlation coefficient')
  if [ $crc -eq 0 ] && [ $src -eq 0 ]; then v=ok; else v=FAIL; fi
  echo "$v $name client=$crc server=$src estimate-failures=$est"
  if [ $v = FAIL ]; then
    grep -h "Can't produce\|peer closed\|rrddmma-perf:\|Correlation\|error\|Error" $C $L | head -4 | sed 's/^/    /'
  fi
  rm -f $L $C
}
echo "sweep loop: $RUNS rounds on $D GID $X"
for r in $(seq $RUNS); do
  if [ "$SECS" -gt 0 ] && [ $(($(date +%s) - START)) -ge "$SECS" ]; then echo "stopped after $((r - 1)) rounds: $SECS s passed"; break; fi
  echo "round $r"
  pair "ib_read_bw -a -F client -> rrddmma-perf read bw -a server" "$ME read bw $DEV -a -n $N" "ib_read_bw $DEV -F -a -n $N"
  pair "rrddmma-perf read bw -a client -> ib_read_bw -a -F server" "ib_read_bw $DEV -F -a -n $N" "$ME read bw $DEV -a -n $N"
  pair "ib_atomic_bw -F client -> rrddmma-perf atomic bw server" "$ME atomic bw $DEV -n 100" "ib_atomic_bw $DEV -F -n 100"
  pair "rrddmma-perf atomic bw client -> ib_atomic_bw -F server" "ib_atomic_bw $DEV -F -n 100" "$ME atomic bw $DEV -n 100"
  [ $((r % CONTROL_EVERY)) -eq 0 ] || continue
  pair "control: ib_read_bw -a client (no -F) -> rrddmma-perf read bw -a server" "$ME read bw $DEV -a -n $N" "ib_read_bw $DEV -a -n $N"
done
