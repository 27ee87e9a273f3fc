# shellcheck shell=bash
# scripts/demo parts 4 and 5: the bubble channel filling while a pipeline runs across the
# emulated WAN, and bubbletea prefilling inside the windows it predicts (docs/bubbles.md,
# docs/bubbletea.md; the interference benchmark is scripts/bench-noninterference). One
# pipeline run feeds both. Sourced by scripts/demo; needs the testbed's variables.

# One pipeline x 2 stages (stage 0 in DC0, stage 1 in DC1), GPipe, 4 micro-batches of 20/40
# ms compute, 2 MiB transfers, receives posted when needed (Megatron's pattern, which the
# plugin's measurement reads as GPU waits). Stage 0 waits about half of every ~0.5 s
# iteration for gradients; its plugin publishes on $BUBBLE_CH. The predictor locks after
# about 4 iterations on a quiet machine; 30 leave ~25 to predict and fill.
BUBBLE_ITERS=30
# ATLAS_DEMO_BUBBLETEA_PORT: bubbletea's loopback port, when the default is taken.
BUBBLETEA_PORT=${ATLAS_DEMO_BUBBLETEA_PORT:-18931}

# The section runs in its own subshell: these globals live as long as it, so the EXIT trap
# still sees them after demo_bubbles returned.
bubbles_cleanup() {
  local p
  for p in $lpid $rpid $ppid $dpid; do stop_pid "$p"; done
  rm -f "/dev/shm$ch" 2>/dev/null || true
}

demo_bubbles() {
  ((QUICK)) && BUBBLE_ITERS=15
  ch=/atlasdemo$$-bubbles url=http://127.0.0.1:$BUBBLETEA_PORT
  dpid="" rpid="" lpid="" ppid=""
  trap bubbles_cleanup EXIT
  rm -f "/dev/shm$ch" 2>/dev/null || true

  say "Part 4: the bubble channel filling while a pipeline runs (atlas-bubbles)"
  echo "1 pipeline x 2 stages across the WAN (GPipe, 4 micro-batches, 20/40 ms compute, 2 MiB"
  echo "transfers). Stage 0's plugin sees when the GPU waits on the WAN, learns the iteration"
  echo "period, predicts the next idle windows and publishes them in shared memory ($ch);"
  echo "atlas-bubbles watches the channel and records it. Meanwhile a bubbletea daemon (part"
  echo "5) reads the same channel and prefills only inside those windows."

  # bubbletea first: its start-up profile times chunk sizes before it serves (CPU engine,
  # one thread, random weights of the 'tiny' shape, docs/bubbletea.md). 'small' costs ~60 ms
  # per 16-token chunk on a loaded 2-core machine (and its fixed cost is not re-fitted
  # online), so its chunks often fit no 150 ms window there; tiny's cost is all per token.
  "$BUBBLETEA" --engine cpu --compute-threads 1 --random-weights tiny --channel "$ch" \
    --listen "127.0.0.1:$BUBBLETEA_PORT" --queue-limit 256 --default-ttft-ms 30000 \
    --profile-tokens 16,64,256,1024 --profile-contexts 0 --profile-budget-ms 8000 \
    --min-chunk-tokens 8 --log-level info 2>"$OUT/bubbletea.log" &
  dpid=$!
  wait_http "$url/healthz" "$dpid" 600 ||
    { tail -n 20 "$OUT/bubbletea.log" >&2; section_fail "bubbletea did not start (log above)"; }

  # Roughly how long the run takes: iterations x ~0.6 s plus set-up; the recorder and the
  # load stop when the pipeline does, these only bound them.
  local secs=$((BUBBLE_ITERS * 6 / 10 + 20))
  "$BUBBLES" record --channel "$ch" --wait --seconds "$secs" --out "$OUT/bubbles" \
    >"$OUT/bubbles-record.log" 2>&1 &
  rpid=$!
  "$PIPE_BENCH" -D 1 -P 2 -M 4 --schedule gpipe --fwd-ms 20 --bwd-ms 40 --act-bytes 2M \
    --compute sleep --recv-post needed --iterations "$BUBBLE_ITERS" --warmup 0 \
    --netns "$DC0_NS,$DC1_NS" --plugin "$PLUGIN" --env ATLAS_LINK_GBPS=1 \
    --stage-env 0:ATLAS_BUBBLES=1 --stage-env "0:ATLAS_BUBBLE_CHANNEL=$ch" --timeout 180 \
    --label bubbles --json "$OUT/bubbles-pipeline.json" --quiet >"$OUT/bubbles-pipeline.txt" 2>&1 &
  ppid=$!
  # Open-loop prefill requests, 256-1024 tokens (ids below tiny's vocabulary of 256), 10 per
  # second: about what one core prefills in the windows, so the daemon has work whenever
  # a window opens. A request the predicted
  # windows cannot finish by its deadline (every request while none is predicted yet) is
  # refused with 503 deadline_unmeetable, as in production (or forwarded, --fallback-url).
  "$LOAD" --url "$url" --rate 10 --duration "$secs" --warmup 0 --connections 64 \
    --prompt-dist uniform:256:1024 --vocab 256 --slo-ms 30000 --timeout 60 \
    >"$OUT/bubbletea-load.txt" 2>&1 &
  lpid=$!

  echo
  echo "-- the channel as 'atlas-bubbles watch' shows it, every 3 s:"
  while kill -0 "$ppid" 2>/dev/null; do
    { "$BUBBLES" watch --channel "$ch" --count 1 --windows 2 2>/dev/null || true; } |
      awk '/^ *(status|period|predicted|accuracy) / { sub(/^ +/, "   "); print; n++ }
        END { if (!n) print "   (no channel yet: the plugin creates it at its first WAN receive)" }'
    echo "   --"
    for _ in 1 2 3 4 5 6; do kill -0 "$ppid" 2>/dev/null && sleep 0.5; done
  done
  wait "$ppid" || { cat "$OUT/bubbles-pipeline.txt" >&2; section_fail "atlas-pipeline-bench failed (output above)"; }
  ppid=""
  cat "$OUT/bubbles-pipeline.txt"
  curl -sf "$url/metrics" >"$OUT/bubbletea-metrics.txt" ||
    section_fail "could not read bubbletea's /metrics"
  stop_pid "$lpid"; lpid=""
  stop_pid "$rpid"; rpid=""
  [[ -s $OUT/bubbles.json ]] || section_fail "atlas-bubbles record wrote no timeline"
  "$BUBBLES" stats --from "$OUT/bubbles.json" --skip-iterations 2 --json >"$OUT/bubbles-stats.json"
  echo
  "$BUBBLES" stats --from "$OUT/bubbles.json" --skip-iterations 2
  bubbles_result
  demo_bubbletea_report
}

bubbles_result() {
  local s=$OUT/bubbles-stats.json sets cov prec frac period
  sets=$(jget "$s" channels.0.prediction_sets)
  cov=$(jget "$s" channels.0.coverage) prec=$(jget "$s" channels.0.precision)
  frac=$(jget "$s" channels.0.bubble_fraction.mean)
  period=$(jget "$OUT/bubbles-pipeline.json" mean_iteration_ms)
  if [[ -z $sets || $sets == 0 || -z $cov || -z $prec ]]; then
    section_fail "no prediction was scored (${sets:-0} sets): the predictor did not lock in $BUBBLE_ITERS iterations (a loaded machine makes iterations irregular)"
  fi
  result bubbles measured \
    "coverage of idle time by predicted windows" "$(awk -v c="$cov" 'BEGIN { printf "%.1f", 100 * c }')" % \
    "$(awk -v p="$prec" -v f="$frac" -v i="$period" -v n="$sets" 'BEGIN {
        printf "precision %.1f%%; GPU idle %.0f%% of a %.0f ms iteration; %d prediction sets", 100 * p, 100 * f, i, n }')"
}

demo_bubbletea_report() {
  local m=$OUT/bubbletea-metrics.txt ndone tok fill bfill chunks over refused
  say "Part 5: bubbletea prefilling inside the predicted windows"
  echo "bubbletea's /metrics after the run (docs/bubbletea.md, Metrics): a chunk starts only if"
  echo "its predicted time fits the rest of the window; fill = prefill time inside windows /"
  echo "window time; an overrun is a chunk that ended after its window did."
  grep -E '^bubbletea_(completions_total|prompt_tokens_total|rejections_total|chunks_total|chunk_overruns_total|window_seconds_total|window_busy_seconds_total|window_fill_fraction|backlogged_window_fill_fraction)' "$m" |
    sed 's/^/  /'
  ndone=$(metric "$m" bubbletea_completions_total) tok=$(metric "$m" bubbletea_prompt_tokens_total)
  fill=$(metric "$m" bubbletea_window_fill_fraction)
  bfill=$(metric "$m" bubbletea_backlogged_window_fill_fraction)
  chunks=$(metric "$m" bubbletea_chunks_total) over=$(metric "$m" bubbletea_chunk_overruns_total)
  # Refusals by reason, e.g. "20 deadline" (docs/bubbletea.md, Errors).
  refused=$(awk '$1 ~ /^bubbletea_rejections_total\{/ {
      r = $1; sub(/.*reason="/, "", r); sub(/".*/, "", r); s = s (s == "" ? "" : ", ") $2 " " r }
    END { print (s == "" ? "none" : s) }' "$m")
  if [[ -z $ndone || ${ndone%.*} -eq 0 || -z $fill || $fill == NaN || $fill == nan ]]; then
    section_fail "bubbletea answered no prefill request inside a window (completions ${ndone:-?}, fill ${fill:-?}, cost model scale $(metric "$m" bubbletea_cost_model_scale); its start-up profile is in $OUT/bubbletea.log)"
  fi
  result bubbletea measured \
    "window fill (prefill time / window time)" "$(awk -v f="$fill" 'BEGIN { printf "%.1f", 100 * f }')" % \
    "$(awk -v d="$ndone" -v t="$tok" -v b="$bfill" -v c="$chunks" -v o="$over" -v r="$refused" 'BEGIN {
        printf "%d prefills (%d tokens) answered, refused: %s; %d chunks, %d overran their window", d, t, r, c, o
        if (b != "" && b != "NaN") printf "; backlogged fill %.1f%%", 100 * b }')"
}
