#!/usr/bin/env bash
# Reproduces the bubbletea figures quoted in docs/bubbletea.md:
#   1. HTTP overhead: bubbletea --engine null under bubbletea-load (TTFT p50/p99).
#   2. Prefill throughput of an engine for documented shapes (the start-up profile).
#   3. Bubble fill: `atlas-bubbles synth` publishes windows (20 ms idle every 50 ms), the
#      daemon prefills under saturating load, /metrics gives the fill and overrun figures.
#
# usage: measure.sh BIN_DIR OUT_DIR [ENGINE [SHAPE [THREADS]]]
#   BIN_DIR holds bubbletea, bubbletea-load and atlas-bubbles; ENGINE is cpu (default) or
#   cuda; SHAPE the --random-weights preset for the fill run (default small); THREADS the cpu
#   engine threads (default 8). Daemon and load generator are pinned to disjoint cores when
#   the machine has at least 8.
# Environment: SKIP_NULL=1 skips part 1; PROFILE_SHAPES (default "small llama-3.2-1b"),
# PROFILE_TOKENS (default 16,64,256,1024) and PROFILE_CONTEXTS (default 0,1024) shape part 2;
# FILL_RATE (default 400 req/s), FILL_SECONDS (default 20), FILL_PROMPTS (default
# uniform:32:512) and VOCAB (token ids below it, default 4096) part 3.
set -u
BIN=${1:?BIN_DIR}
OUT=${2:?OUT_DIR}
ENGINE=${3:-cpu}
SHAPE=${4:-small}
THREADS=${5:-8}
mkdir -p "$OUT"
NCPU=$(nproc)
if [ "$NCPU" -ge 8 ]; then
    HALF=$((NCPU / 2))
    DAEMON_CPUS="0-$((HALF - 1))"
    LOAD_CPUS="$HALF-$((NCPU - 1))"
else
    DAEMON_CPUS="0-$((NCPU - 1))"
    LOAD_CPUS="0-$((NCPU - 1))"
fi
PORT=18700

wait_up() {  # port
    for _ in $(seq 1 600); do
        if curl -sf "http://127.0.0.1:$1/healthz" >/dev/null 2>&1 ||
           curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/healthz" 2>/dev/null | grep -q 503; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

stop() {  # pid
    kill -TERM "$1" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
    kill -KILL "$1" 2>/dev/null
}

echo "== machine: $NCPU cpus; daemon on $DAEMON_CPUS, load on $LOAD_CPUS"

# ---- 1. HTTP overhead with the null engine ----------------------------------------------
if [ "${SKIP_NULL:-0}" != 1 ]; then
taskset -c "$DAEMON_CPUS" "$BIN/bubbletea" --engine null --random-weights tiny --windows always \
    --http-threads 4 --listen 127.0.0.1:$PORT --log-level warn 2>"$OUT/null.log" &
PID=$!
wait_up $PORT || { echo "null daemon did not start"; cat "$OUT/null.log"; }
for RATE in 1000 5000; do
    echo "== null engine, $RATE req/s"
    taskset -c "$LOAD_CPUS" "$BIN/bubbletea-load" --url http://127.0.0.1:$PORT --rate $RATE \
        --duration 10 --warmup 2 --connections 32 --prompt-dist fixed:128 --slo-ms 1 \
        --json "$OUT/null_$RATE.json"
done
curl -s http://127.0.0.1:$PORT/metrics > "$OUT/null_metrics.txt"
stop $PID
fi

# ---- 2. Engine prefill throughput (start-up profile) -------------------------------------
for S in ${PROFILE_SHAPES:-small llama-3.2-1b}; do
    echo "== $ENGINE engine profile, shape $S"
    PORT2=$((PORT + 1))
    taskset -c "$DAEMON_CPUS" "$BIN/bubbletea" --engine "$ENGINE" --random-weights "$S" \
        --compute-threads "$THREADS" --windows always --listen 127.0.0.1:$PORT2 \
        --profile-tokens "${PROFILE_TOKENS:-16,64,256,1024}" \
        --profile-contexts "${PROFILE_CONTEXTS:-0,1024}" --profile-budget-ms 60000 \
        2>"$OUT/profile_${ENGINE}_$S.log" &
    PID=$!
    wait_up $PORT2 || echo "daemon ($S) did not start"
    grep -E "profile|cost model|engine" "$OUT/profile_${ENGINE}_$S.log"
    stop $PID
done

# ---- 3. Bubble fill under saturating load ------------------------------------------------
CH=/atlas-bubbles-measure-$$
"$BIN/atlas-bubbles" synth --channel "$CH" --period-ms 50 --idle 10:20 --seconds 60 \
    >"$OUT/synth.log" 2>&1 &
SYNTH=$!
sleep 0.5
PORT3=$((PORT + 2))
taskset -c "$DAEMON_CPUS" "$BIN/bubbletea" --engine "$ENGINE" --random-weights "$SHAPE" \
    --compute-threads "$THREADS" --channel "$CH" --listen 127.0.0.1:$PORT3 --queue-limit 256 \
    --default-ttft-ms 20000 --min-chunk-tokens 8 2>"$OUT/fill_${ENGINE}.log" &
PID=$!
wait_up $PORT3 || { echo "fill daemon did not start"; cat "$OUT/fill_${ENGINE}.log"; }
sleep 1
echo "== bubble fill: $ENGINE engine, shape $SHAPE, windows 20 ms / 50 ms"
taskset -c "$LOAD_CPUS" "$BIN/bubbletea-load" --url http://127.0.0.1:$PORT3 \
    --rate "${FILL_RATE:-400}" --duration "${FILL_SECONDS:-20}" --warmup 3 --connections 256 --prompt-dist "${FILL_PROMPTS:-uniform:32:512}" --vocab "${VOCAB:-4096}" \
    --slo-ms 20000 --json "$OUT/fill_${ENGINE}_load.json"
curl -s http://127.0.0.1:$PORT3/metrics > "$OUT/fill_${ENGINE}_metrics.txt"
grep -E "^bubbletea_(chunks_total|chunk_overruns_total|chunk_overrun_seconds_total|chunks_cancelled_total|window_fill_fraction|backlogged_window_fill_fraction|backlogged_window_seconds_total|window_seconds_total|end_margin_seconds|cost_model_error_ratio|cost_model_bias_ratio|completions_total|prompt_tokens_total|requests_expired_total|queue_depth)" \
    "$OUT/fill_${ENGINE}_metrics.txt"
stop $PID
kill $SYNTH 2>/dev/null
wait 2>/dev/null
echo "== done"
