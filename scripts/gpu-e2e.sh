#!/usr/bin/env bash
# GPU end to end (Atlas issue 15; docs/gpu-check.md, "scripts/gpu-e2e.sh"): on a machine with
# one NVIDIA GPU, in one bounded run, writing logs and JSON under $OUT:
#   setup      find the binaries, libnccl.so.2 (PyTorch's pip NCCL), a python with torch;
#              build what is missing (atlas-nccl-sweep needs only a compiler, CUDA, nccl.h)
#   facts      host, GPU (read-only queries), RDMA and NIC facts (item 6)
#   testbed    two network namespaces joined by atlas-wanem, 50 ms RTT, 1 Gbit/s (item 2);
#              loopback with ATLAS_WAN_RTT_US=0 where namespaces or TUN do not work
#   sweep      nccl-tests-style sweep, Atlas vs NCCL's socket transport (item 3)
#   torch      2-stage 1F1B PyTorch training over P2P, both transports, bubble channel
#              scored against CUDA-event ground truth (item 4)
#   bubbletea  atlas-pipeline-bench (stage 0 on the GPU, stage 1 on the CPU) with and
#              without bubbletea's CUDA engine filling stage 0's bubbles (item 5)
#   report     OUT/summary.md and OUT/summary.json: every table
# It never resets or reconfigures the GPU (only read-only nvidia-smi queries).
#
# Usage:
#   scripts/gpu-e2e.sh [--out DIR] [--bin DIR] [--phases LIST] [--budget S]   (GPU machine)
#   scripts/gpu-e2e.sh --dry-run [--out DIR]   CPU mode: every phase's logic without a GPU
#                                              (simulated sweep, gloo training, CPU engine)
#   scripts/gpu-e2e.sh --stage [DIR]           dev machine: build the release binaries with
#                                              CUDA and stage them, stripped, in DIR
#                                              (default build-gpu/stage) for `carry`
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SELF=$ROOT/scripts/gpu-e2e.sh
REPORT=$ROOT/perf/gpu-check/gpu_e2e_report.py
TRAIN=$ROOT/perf/torch-pipeline/pipeline_train.py
SCORE=$ROOT/perf/torch-pipeline/score_bubbles.py
PHASES_ALL=(setup facts testbed sweep torch bubbletea report)

# Phase budgets in seconds (a phase past its budget is killed, with everything it started).
declare -A BUDGET=([setup]=120 [facts]=30 [testbed]=45 [sweep]=230 [torch]=110
                   [bubbletea]=125 [report]=20)
for p in "${!BUDGET[@]}"; do  # GPU_E2E_BUDGET_<PHASE>=S overrides one
  v=GPU_E2E_BUDGET_${p^^}
  [[ -n ${!v:-} ]] && BUDGET[$p]=${!v}
done
SWEEP_NET_BUDGET=${GPU_E2E_SWEEP_NET_S:-70}  # per net of the main sweep
TOTAL_BUDGET=450

usage() { sed -n '2,25p' "$SELF" | sed 's/^# \{0,1\}//'; }
log() { echo "gpu-e2e: $*" >&2; }
die() { log "$*"; exit 2; }

# ---------------------------------------------------------------------------------------------
# --stage (dev machine)

STAGE_TOOLS=(nccl-net-atlas atlas-nccl-sweep atlas-wanem atlas-pipeline-bench bubbletea
             bubbletea-load atlas-bubbles)

stage() {  # dest
  local dest=$1 bdir=${ATLAS_STAGE_BUILD_DIR:-$ROOT/build-gpu}  # or an existing tree
  command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] || die "--stage needs nvcc (CUDA 13)"
  if [[ ! -f $bdir/build.ninja ]]; then
    cmake -S "$ROOT" -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATLAS_BUILD_TESTS=OFF \
      -DATLAS_BUILD_BENCHMARKS=ON -DATLAS_CUDA=ON -DATLAS_WERROR=OFF >"$bdir.configure.log" 2>&1 \
      || { tail -n 30 "$bdir.configure.log" >&2; die "cmake configure failed ($bdir.configure.log)"; }
  fi
  cmake --build "$bdir" -j "${ATLAS_BUILD_JOBS:-2}" --target "${STAGE_TOOLS[@]}" || die "build failed"
  rm -rf "$dest" && mkdir -p "$dest/lib"
  local f
  for f in plugin/libnccl-net-atlas.so perf/gpu-check/atlas-nccl-sweep perf/atlas-wanem/atlas-wanem \
           perf/atlas-pipeline-bench/atlas-pipeline-bench bubbletea/daemon/bubbletea \
           perf/bubbletea-load/bubbletea-load bubbletea/tools/atlas-bubbles; do
    cp -f "$bdir/$f" "$dest/" && strip --strip-unneeded "$dest/$(basename "$f")"
  done
  # Libraries the GPU machine lacks (liburing, OpenSSL, Boost): every NEEDED library but the
  # C/C++ runtime and the CUDA/NCCL ones, which come from the machine (driver, pip wheels).
  local lib path b
  for b in "$dest"/*; do
    [[ -f $b ]] || continue
    for lib in $(objdump -p "$b" | awk '/NEEDED/ {print $2}'); do
      case $lib in
        libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*|libstdc++.so.*|\
        libgcc_s.so.*|libcuda.so.*|libcudart.so.*|libnccl.so.*|libcublas*.so.*) continue ;;
      esac
      path=$(ldd "$b" | awk -v l="$lib" '$1 == l {print $3}')
      [[ -n $path && -e $path && ! -e $dest/lib/$lib ]] && cp -fL "$path" "$dest/lib/$lib"
    done
  done
  {
    echo "staged: $(date -u +%FT%TZ) from $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "host: $(uname -srm), $(ldd --version 2>&1 | head -n1)"
    for b in "$dest"/* "$dest"/lib/*; do
      [[ -f $b && $b != */MANIFEST.txt ]] || continue
      echo "$(basename "$b"): $(du -k "$b" | cut -f1) KiB; needs $(objdump -p "$b" | awk '/NEEDED/ {printf "%s ", $2}');" \
           "newest glibc symbol $(objdump -T "$b" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n1)," \
           "libstdc++ $(objdump -T "$b" 2>/dev/null | grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -n1)"
    done
    echo "total: $(du -sk "$dest" | cut -f1) KiB (carry limit 65536 KiB)"
  } >"$dest/MANIFEST.txt"
  cat "$dest/MANIFEST.txt"
  log "staged into $dest; on the GPU machine: scripts/gpu-e2e.sh --bin $dest (carry it)"
}

# ---------------------------------------------------------------------------------------------
# helpers shared by the phases (each phase runs as its own process: `$SELF --phase NAME`)

note() { echo "$*" >>"$OUT/phases/$PHASE.note"; log "$PHASE: $*"; }
skip() { note "$*"; exit 3; }

# The Python interpreter that imports torch (the GPU machine's PyTorch; Debian's python3-torch
# here), else empty.
pick_torch_python() {
  local p
  [[ -n ${GPU_E2E_NO_TORCH:-} ]] && return 1  # tests of the orchestration skip the probe
  for p in ${GPU_E2E_PYTHON:-} python3 /usr/bin/python3 python; do
    command -v "$p" >/dev/null 2>&1 || continue
    if timeout 90 "$p" -c 'import torch, torch.distributed' >/dev/null 2>&1; then
      command -v "$p"; return 0
    fi
  done
  return 1
}

# Library directories of the pip CUDA wheels (nvidia/*/lib, nvidia/cu13/lib, torch/lib), one
# per line; libnccl.so.2's directory first.
pip_libdirs() {  # python
  "$1" - <<'EOF' 2>/dev/null
import glob, os, site, sys
roots = []
for f in (getattr(site, "getsitepackages", lambda: [])(), [site.getusersitepackages()], sys.path):
    roots += [p for p in f if p and os.path.isdir(p)]
dirs, seen = [], set()
for r in roots:
    for pat in ("nvidia/*/lib", "nvidia/*/lib64", "nvidia/cu*/lib", "torch/lib"):
        for d in sorted(glob.glob(os.path.join(r, pat))):
            # torch/lib only where it bundles NCCL: its other libraries must not shadow ours
            if pat == "torch/lib" and not os.path.exists(os.path.join(d, "libnccl.so.2")):
                continue
            if d not in seen:
                seen.add(d); dirs.append(d)
nccl = [d for d in dirs if os.path.exists(os.path.join(d, "libnccl.so.2"))]
for d in nccl + [d for d in dirs if d not in nccl]:
    print(d)
EOF
}

find_tool() {  # name -> path in $BIN (flat), the staged folder, or a build tree ($ATLAS_BUILD)
  local n=$1 d
  for d in ${BIN:-} "$ROOT/build-gpu/stage"; do
    [[ -n $d && -e $d/$n ]] && { echo "$d/$n"; return 0; }
  done
  local -A tree=([libnccl-net-atlas.so]=plugin [atlas-nccl-sweep]=perf/gpu-check
                 [atlas-wanem]=perf/atlas-wanem [atlas-pipeline-bench]=perf/atlas-pipeline-bench
                 [bubbletea]=bubbletea/daemon [bubbletea-load]=perf/bubbletea-load
                 [atlas-bubbles]=bubbletea/tools)
  for d in ${ATLAS_BUILD:-} "$ROOT/build-gpu" "$ROOT/build"; do
    [[ -e $d/${tree[$n]}/$n ]] && { echo "$d/${tree[$n]}/$n"; return 0; }
  done
  return 1
}

# atlas-nccl-sweep from its sources with the machine's compiler: it needs only CUDA's
# headers and static runtime, nccl.h (the toolkit's or the nvidia-nccl wheel's) and
# include/atlas/common.
build_sweep() {  # outdir python
  local out=$1 py=$2 nvcc cuda cxx inc lib nccl_inc
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  [[ -x $nvcc ]] || { note "cannot build atlas-nccl-sweep: no nvcc"; return 1; }
  cuda=$(cd "$(dirname "$nvcc")/.." && pwd)
  inc=$cuda/include
  for lib in "$cuda/lib64" "$cuda/lib" "$cuda/targets/x86_64-linux/lib"; do
    [[ -e $lib/libcudart_static.a ]] && break
  done
  nccl_inc=""
  for d in "$inc" $(pip_libdirs "$py" | sed 's|/lib$|/include|'); do
    [[ -e $d/nccl.h ]] && { nccl_inc=$d; break; }
  done
  [[ -n $nccl_inc ]] || { note "cannot build atlas-nccl-sweep: nccl.h not found"; return 1; }
  cxx=${CXX:-$(command -v g++ || command -v c++ || echo "")}
  [[ -n $cxx ]] || cxx=$nvcc
  log "building atlas-nccl-sweep with $cxx (nccl.h from $nccl_inc)"
  local src=$ROOT/perf/gpu-check
  "$cxx" -std=c++20 -O2 -I"$ROOT" -I"$ROOT/include" -I"$inc" -I"$nccl_inc" \
    "$src"/gpu_check_util.cc "$src"/sweep_core.cc "$src"/sweep_report.cc "$src"/sweep_options.cc \
    "$src"/sweep_rank.cc "$src"/sweep_nccl.cc "$src"/sweep_main.cc "$ROOT"/options/*.cc \
    -o "$out/atlas-nccl-sweep" -L"$lib" -lcudart_static -ldl -lrt -lpthread \
    >"$OUT/setup/build-sweep.log" 2>&1 \
    || { note "building atlas-nccl-sweep failed (setup/build-sweep.log)"; return 1; }
}

http_get() {  # url -> body on stdout (python: the GPU machine may lack curl)
  "$PY" - "$1" <<'EOF'
import sys, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode())
except Exception as e:
    sys.exit(1)
EOF
}

# ---------------------------------------------------------------------------------------------
# phases

phase_setup() {
  mkdir -p "$OUT/setup" "$OUT/bin"
  local torch_py="" py nccl_dir="" dirs=""
  torch_py=$(pick_torch_python) || torch_py=""
  py=${torch_py:-$(command -v python3)}
  [[ -n $py ]] || skip "no python3"
  if [[ -n $torch_py ]]; then
    dirs=$(pip_libdirs "$torch_py")
    nccl_dir=$(echo "$dirs" | while read -r d; do [[ -e $d/libnccl.so.2 ]] && { echo "$d"; break; }; done)
  fi
  [[ -z $nccl_dir ]] && nccl_dir=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 / {print $NF; exit}' | xargs -r dirname)
  local binlib=""
  for d in ${BIN:-} "$ROOT/build-gpu/stage"; do [[ -d $d/lib ]] && { binlib=$d/lib; break; }; done
  local ldp
  ldp=$(echo "$dirs" | paste -sd: -)
  ldp=${ldp}${binlib:+:$binlib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export LD_LIBRARY_PATH=$ldp
  declare -A tool=()
  local n missing=()
  for n in libnccl-net-atlas.so atlas-nccl-sweep atlas-wanem atlas-pipeline-bench bubbletea \
           bubbletea-load atlas-bubbles; do
    tool[$n]=$(find_tool "$n") || { tool[$n]=""; missing+=("$n"); }
  done
  if [[ -z ${tool[atlas-nccl-sweep]} ]] && ((DRY == 0)); then
    build_sweep "$OUT/bin" "$py" && tool[atlas-nccl-sweep]=$OUT/bin/atlas-nccl-sweep
  fi
  if ((${#missing[@]})) && command -v cmake >/dev/null; then
    # The rest needs liburing, OpenSSL, nlohmann-json and Boost headers: try the project's
    # CMake once; on a machine without them it fails at configure, quickly, and says why.
    local bdir=$OUT/setup/build
    if cmake -S "$ROOT" -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DATLAS_BUILD_TESTS=OFF \
         -DATLAS_WERROR=OFF >"$OUT/setup/cmake.log" 2>&1; then
      local targets=()
      for n in "${missing[@]}"; do [[ -z ${tool[$n]} ]] && targets+=("${n%.so}"); done
      targets=("${targets[@]/libnccl-net-atlas/nccl-net-atlas}")
      cmake --build "$bdir" -j "$(nproc)" --target "${targets[@]}" >>"$OUT/setup/cmake.log" 2>&1
      for n in "${missing[@]}"; do
        [[ -z ${tool[$n]} ]] && tool[$n]=$(find -L "$bdir" -name "$n" -type f | head -n1)
      done
    else
      note "cannot build ${missing[*]} here: $(grep -m1 -iE 'error|could not|not found' "$OUT/setup/cmake.log")"
    fi
  fi
  {
    echo "export LD_LIBRARY_PATH='$LD_LIBRARY_PATH'"
    echo "TORCH_PY='$torch_py'"
    echo "PY='$py'"
    echo "NCCL_LIB='${nccl_dir:+$nccl_dir/libnccl.so.2}'"
    echo "PLUGIN='${tool[libnccl-net-atlas.so]}'"
    echo "SWEEP='${tool[atlas-nccl-sweep]}'"
    echo "WANEM='${tool[atlas-wanem]}'"
    echo "PIPEBENCH='${tool[atlas-pipeline-bench]}'"
    echo "DAEMON='${tool[bubbletea]}'"
    echo "LOADGEN='${tool[bubbletea-load]}'"
    echo "BUBBLES='${tool[atlas-bubbles]}'"
  } >"$OUT/runtime.env"
  cat "$OUT/runtime.env" >&2
  local b bad=0
  for n in "${!tool[@]}"; do
    b=${tool[$n]}
    [[ -z $b ]] && { note "$n: missing"; bad=1; continue; }
    if ldd "$b" 2>/dev/null | grep -q 'not found'; then
      note "$n: unresolved libraries: $(ldd "$b" | awk '/not found/ {printf "%s ", $1}')"; bad=1
    fi
  done
  [[ -z $torch_py ]] && note "no python with torch: the torch phase will be skipped"
  ((DRY == 0)) && [[ -z $nccl_dir ]] && { note "libnccl.so.2 not found (pip install nvidia-nccl-cu13)"; bad=1; }
  return $bad
}

phase_facts() {
  # shellcheck disable=SC1091
  source "$OUT/runtime.env"
  "$PY" "$REPORT" facts "$OUT" ${TORCH_PY:+--python "$TORCH_PY"} ${NCCL_LIB:+--nccl "$NCCL_LIB"}
}

phase_testbed() {
  source "$OUT/runtime.env"
  local why=""
  [[ ${GPU_E2E_TESTBED:-auto} == loopback ]] && why="GPU_E2E_TESTBED=loopback"
  [[ -z $why && $(id -u) -ne 0 ]] && why="not root"
  [[ -z $why ]] && ! command -v ip >/dev/null && why="no 'ip' (iproute2)"
  [[ -z $why ]] && ! command -v ping >/dev/null && why="no 'ping'"
  [[ -z $why && ! -c /dev/net/tun ]] && why="no /dev/net/tun"
  [[ -z $why && -z $WANEM ]] && why="no atlas-wanem binary"
  if [[ -z $why ]]; then
    if ! ip netns add "$WAN_PREFIX-probe" 2>"$OUT/testbed-probe.log"; then
      why="ip netns add failed: $(head -n1 "$OUT/testbed-probe.log")"
    else
      ip netns del "$WAN_PREFIX-probe" 2>/dev/null
    fi
  fi
  if [[ -z $why ]]; then
    if ATLAS_WANEM=$WANEM ATLAS_WAN_PREFIX=$WAN_PREFIX "$ROOT/scripts/wan-up" -n 2 --timeout 20 \
         >"$OUT/testbed.txt" 2>&1; then
      local envf
      envf=$(ATLAS_WAN_PREFIX=$WAN_PREFIX "$ROOT/scripts/wan-up" --print-env)
      eval "$envf"
      {
        echo "MODE=netns"; echo "NS0=$DC0_NS"; echo "NS1=$DC1_NS"; echo "ADDR0=$DC0_ADDR"
        echo "IFNAME=to-dc"; echo "ATLAS_EXTRA='ATLAS_LINK_GBPS=1'"
      } >"$OUT/testbed.env"
      printf '{"mode": "netns", "note": "2 namespaces, atlas-wanem: 50 ms RTT, 1 Gbit/s (scripts/wan/default.conf)", "ns": ["%s", "%s"], "ping_ms": "%s"}\n' \
        "$DC0_NS" "$DC1_NS" "${LINK_DC0_DC1_PING_MS:-?}" >"$OUT/testbed.json"
      cat "$OUT/testbed.txt" >&2
      return 0
    fi
    why="wan-up failed: $(tail -n 3 "$OUT/testbed.txt" | tr '\n' ' ')"
  fi
  note "no emulated WAN ($why): loopback with ATLAS_WAN_RTT_US=0 instead"
  {
    echo "MODE=loopback"; echo "NS0="; echo "NS1="; echo "ADDR0=127.0.0.1"; echo "IFNAME=lo"
    echo "ATLAS_EXTRA='ATLAS_WAN_RTT_US=0'"
  } >"$OUT/testbed.env"
  printf '{"mode": "loopback", "note": "fallback: %s; loopback, ATLAS_WAN_RTT_US=0, no WAN delay or rate limit"}\n' \
    "${why//\"/\'}" >"$OUT/testbed.json"
  return 0
}

# Arguments common to every atlas-nccl-sweep call of this run.
sweep_common() {
  SWEEP_ARGS=(--plugin "$PLUGIN" --addr "$ADDR0" --ifname "$IFNAME" --env "$ATLAS_EXTRA"
              --env "ATLAS_BUBBLE_CHANNEL=/$TAG-sweep-{local_rank}")
  [[ -n $NCCL_LIB ]] && SWEEP_ARGS+=(--nccl "$NCCL_LIB")
  [[ $MODE == netns ]] && SWEEP_ARGS+=(--netns "$NS0,$NS1")
  ((DRY)) && SWEEP_ARGS+=(--simulate --sim-gbps 1 --sim-rtt-ms 50)
  return 0
}

phase_sweep() {
  source "$OUT/runtime.env"; source "$OUT/testbed.env"
  [[ -n $SWEEP && (-n $PLUGIN || $DRY -eq 1) ]] || skip "atlas-nccl-sweep or the plugin is missing"
  local d=$OUT/sweep
  mkdir -p "$d/logs"
  sweep_common
  # NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD for this WAN: measured, not assumed. The
  # candidates bracket the analysis in docs/gpu-check.md (16 sockets); the best mean busbw
  # of sendrecv and all_reduce at 32 MiB wins; 4x4 if the tuning run fails.
  log "sweep: tuning the socket transport"
  timeout -k 5 75 "$SWEEP" "${SWEEP_ARGS[@]}" --net socket:2x2,socket:4x4,socket:8x8 \
    --ops sendrecv,all_reduce -b 32M -e 32M -w 1 --target-ms 0 --max-iters 1 --timeout 40 \
    --logdir "$d/logs" --json "$d/tune.json" >"$d/tune.txt" 2>"$d/tune.log"
  local socket
  socket=$("$PY" "$REPORT" tune-pick "$d/tune.json") || {
    socket=socket:4x4
    note "tuning failed ($(grep -m1 '^# error' "$d/tune.txt" | cut -c3-200)): socket:4x4"
  }
  echo "$socket" >"$d/socket-choice.txt"
  log "sweep: socket setting $socket; Atlas vs $socket, 8 B .. ${SWEEP_MAX}"
  "$SWEEP" "${SWEEP_ARGS[@]}" --net "atlas,$socket" -b 8 -e "$SWEEP_MAX" \
    --budget-s "$SWEEP_NET_BUDGET" --target-ms 100 --max-iters 10 --timeout $((SWEEP_NET_BUDGET + 40)) \
    --logdir "$d/logs" --json "$d/sweep.json" >"$d/sweep.txt" 2>"$d/sweep.log"
  local rc=$?
  tail -n 40 "$d/sweep.txt" >&2
  ((rc == 0)) || note "atlas-nccl-sweep exited $rc: $(grep '^# error\|MISSING' "$d/sweep.txt" | head -n 2 | cut -c3-200 | tr '\n' ' ')"
  return $rc
}

phase_torch() {
  source "$OUT/runtime.env"; source "$OUT/testbed.env"
  [[ -n $TORCH_PY ]] || skip "no python with torch"
  [[ -n $SWEEP ]] || skip "atlas-nccl-sweep missing (it writes the transports' environments)"
  local d=$OUT/torch
  mkdir -p "$d/logs"
  local socket
  socket=$(cat "$OUT/sweep/socket-choice.txt" 2>/dev/null || echo socket:4x4)
  local model=(--steps "$TORCH_STEPS" --warmup-steps 3 --microbatches 4)
  if ((DRY)); then
    model+=(--backend gloo --device cpu --hidden 64 --heads 4 --layers 2 --seq 32 --vocab 512
            --micro-batch 2)
  else
    model+=(--backend nccl --device cuda)
  fi
  local netns_args=()
  [[ $MODE == netns ]] && netns_args=(--netns "$NS0,$NS1")
  local rc=0 label net r rpids=()
  for label in atlas socket; do
    net=$([[ $label == atlas ]] && echo atlas || echo "$socket")
    for r in 0 1; do
      # gloo (--dry-run) wants the exact device: dc0's link is to-dc1 and dc1's to-dc0.
      local gloo_if=lo
      [[ $MODE == netns ]] && gloo_if=to-dc$((1 - r))
      "$SWEEP" --print-env $r --net "$net" --plugin "${PLUGIN:-/nonexistent}" --ifname "$IFNAME" \
        --logdir "$d/logs" --env "$ATLAS_EXTRA" --env "ATLAS_BUBBLE_CHANNEL=/$TAG-torch-{local_rank}" \
        --env "GLOO_SOCKET_IFNAME=$gloo_if" >"$d/$label-rank$r.env" 2>>"$d/env.log" \
        || { note "no environment for $label (env.log)"; rc=1; continue 2; }
    done
    rpids=()
    if [[ $label == atlas && -n $BUBBLES ]] && ((DRY == 0)); then
      for r in 0 1; do
        "$BUBBLES" record --channel "/$TAG-torch-$r" --wait --seconds 100 \
          --out "$d/atlas-bubbles-rank$r" >"$d/record-rank$r.log" 2>&1 &
        rpids+=($!)
      done
    fi
    log "torch: $label"
    "$TORCH_PY" "$TRAIN" --launch --out "$d" --label "$label" --master "$ADDR0:0" \
      "${netns_args[@]}" --env-file "0:$d/$label-rank0.env" --env-file "1:$d/$label-rank1.env" \
      --timeout 80 "${model[@]}" >"$d/$label-launch.log" 2>&1 || {
      rc=1
      note "$label run failed: $(tail -q -n 1 "$d/$label-rank0.log" "$d/$label-rank1.log" 2>/dev/null | cut -c1-200 | sort -u | tr '\n' ' ')"
    }
    for r in "${rpids[@]}"; do kill -INT "$r" 2>/dev/null; done
    for r in "${rpids[@]}"; do wait "$r" 2>/dev/null; done
  done
  if ((DRY)); then
    echo "Bubble scoring not run: --dry-run trains with gloo, so the plugin is not in the data path." \
      >"$d/bubbles-note.txt"
  else
    for r in 0 1; do
      if [[ -e $d/atlas-bubbles-rank$r.json && -e $d/atlas-rank$r.json ]]; then
        "$PY" "$SCORE" --recording "$d/atlas-bubbles-rank$r.json" --truth "$d/atlas-rank$r.json" \
          --out-prefix "$d/atlas-bubbles-rank$r" --skip-iterations 3 --atlas-bubbles "$BUBBLES" \
          >"$d/atlas-bubbles-rank$r-score.json" 2>"$d/score-rank$r.log" || note "scoring rank $r failed"
      else
        note "no bubble recording or ground truth for rank $r"
      fi
    done
  fi
  return $rc
}

phase_bubbletea() {
  source "$OUT/runtime.env"; source "$OUT/testbed.env"
  local n
  for n in PIPEBENCH DAEMON LOADGEN PLUGIN; do [[ -n ${!n} ]] || skip "${n,,} missing"; done
  local d=$OUT/bubbletea
  mkdir -p "$d"
  local ch=/$TAG-bt port_file=$d/daemon.port
  # Training: 1 pipeline x 2 stages across the link, 1F1B, receives posted when needed
  # (Megatron's pattern); stage 0 computes on the GPU, stage 1 on a CPU core.
  local base=(-D 1 -P 2 -M 4 --schedule 1f1b --fwd-ms "$BT_FWD" --bwd-ms "$BT_BWD" --act-bytes 2M
              --recv-post needed --iterations "$BT_ITERS" --warmup "$BT_WARMUP" --plugin "$PLUGIN"
              --env "$ATLAS_EXTRA" --quiet --timeout 60)
  [[ $MODE == netns ]] && base+=(--netns "$NS0,$NS1")
  if ((DRY)); then
    base+=(--compute sleep,sleep)
  else
    base+=(--compute cuda,spin)
  fi
  local engine=(--engine cuda --cuda-device 0 --random-weights llama-3.2-1b --random-dtype bf16)
  ((DRY)) && engine=(--engine cpu --compute-threads 1 --random-weights tiny)
  printf '{"description": "1x2 pipeline, 1F1B, M=4, fwd %s ms / bwd %s ms, act 2 MiB, %s testbed; stage 0 compute %s, stage 1 %s; bubbletea %s; load %s req/s uniform:32:512; %s measured + %s warm-up iterations per run, %s pairs interleaved"}\n' \
    "$BT_FWD" "$BT_BWD" "$MODE" "$( ((DRY)) && echo 'sleep (dry run)' || echo 'CUDA (cuBLAS GEMMs)')" \
    "$( ((DRY)) && echo 'sleep' || echo 'CPU spin')" "${engine[*]}" "$BT_RATE" "$BT_ITERS" \
    "$BT_WARMUP" "$BT_PAIRS" >"$d/config.json"
  rm -f "$port_file" "/dev/shm$ch" 2>/dev/null
  "$DAEMON" "${engine[@]}" --channel "$ch" --listen 127.0.0.1:0 --port-file "$port_file" \
    --queue-limit 256 --default-ttft-ms 30000 --profile-budget-ms 8000 --log-level warn \
    >"$d/daemon.log" 2>&1 &
  local dpid=$!
  local i url=""
  for i in $(seq 1 900); do
    if [[ -s $port_file ]] && http_get "http://127.0.0.1:$(cat "$port_file")/healthz" >/dev/null; then
      url=http://127.0.0.1:$(cat "$port_file"); break
    fi
    kill -0 $dpid 2>/dev/null || break
    sleep 0.1
  done
  [[ -n $url ]] || {
    tail -n 20 "$d/daemon.log" >&2
    kill $dpid 2>/dev/null
    note "bubbletea did not start: $(tail -n 1 "$d/daemon.log" | cut -c1-200)"
    return 1
  }
  log "bubbletea: daemon up at $url"
  local ns_per_gemm="" rc=0 k kind lpid rpid t0 t1
  for k in $(seq 1 "$BT_PAIRS"); do
    for kind in without with; do
      local label=$kind-$k args=("${base[@]}")
      [[ -n $ns_per_gemm ]] && args+=(--cuda-ns-per-gemm "$ns_per_gemm")
      lpid=""
      if [[ $kind == with ]]; then
        args+=(--stage-env "0:ATLAS_BUBBLE_CHANNEL=$ch")
        http_get "$url/metrics" >"$d/$label-metrics-before.txt"
        "$LOADGEN" --url "$url" --rate "$BT_RATE" --duration 120 --warmup 0 --connections 64 \
          --prompt-dist uniform:32:512 --vocab "$BT_VOCAB" --slo-ms 30000 --timeout 60 \
          >"$d/$label-load.txt" 2>&1 &
        lpid=$!
      else
        args+=(--stage-env "0:ATLAS_BUBBLE_CHANNEL=$ch-off")  # the daemon does not see it
      fi
      args+=(--stage-env "1:ATLAS_BUBBLE_CHANNEL=$ch-s1")
      "$BUBBLES" record --channel "$([[ $kind == with ]] && echo "$ch" || echo "$ch-off")" --wait \
        --seconds 60 --out "$d/$label-bubbles" >/dev/null 2>&1 &
      rpid=$!
      log "bubbletea: $label"
      t0=$(date +%s.%N)
      "$PIPEBENCH" "${args[@]}" --label "$label" --json "$d/$label.json" >"$d/$label.txt" 2>"$d/$label.log" \
        || { rc=1; note "$label failed: $(tail -n 1 "$d/$label.log")"; }
      t1=$(date +%s.%N)
      [[ $kind == with ]] && http_get "$url/metrics" >"$d/$label-metrics-after.txt"
      printf '{"seconds": %s}\n' "$("$PY" -c "print(round($t1 - $t0, 3))")" >"$d/$label-wall.json"
      [[ -n $lpid ]] && { kill "$lpid" 2>/dev/null; wait "$lpid" 2>/dev/null; }
      kill -INT "$rpid" 2>/dev/null; wait "$rpid" 2>/dev/null
      [[ -e $d/$label-bubbles.json ]] && "$BUBBLES" stats --from "$d/$label-bubbles.json" --skip-iterations 3 \
        >"$d/$label-bubbles-stats.txt" 2>&1
      if [[ -z $ns_per_gemm ]]; then
        ns_per_gemm=$(grep -o 'ns_per_gemm=[0-9.]*' "$d/$label.log" | head -n1 | cut -d= -f2)
        [[ -n $ns_per_gemm ]] && log "bubbletea: GEMM calibration ${ns_per_gemm} ns, fixed for every run"
      fi
    done
  done
  kill -TERM $dpid 2>/dev/null; wait $dpid 2>/dev/null
  rm -f "/dev/shm$ch" "/dev/shm$ch-off" "/dev/shm$ch-s1" 2>/dev/null
  "$PY" "$REPORT" bubbletea "$OUT" >"$d/results-print.json" || rc=1
  return $rc
}

phase_report() {
  source "$OUT/runtime.env"
  "${PY:-python3}" "$REPORT" summary "$OUT"
}

# ---------------------------------------------------------------------------------------------
# main

# A phase process inherits the run's mode and binary folder from the environment.
DRY=${GPU_E2E_DRY:-0} OUT_ARG="" BIN=${GPU_E2E_BIN:-} PHASE="" PHASES="" STAGE_DIR=""
while (($#)); do
  case $1 in
    --dry-run) DRY=1; shift ;;
    --out) OUT_ARG=${2:?--out needs a directory}; shift 2 ;;
    --bin) BIN=$(cd "${2:?--bin needs a directory}" && pwd) || die "no such directory: $2"; shift 2 ;;
    --phases) PHASES=${2:?--phases needs a list}; shift 2 ;;
    --budget) TOTAL_BUDGET=${2:?--budget needs seconds}; shift 2 ;;
    --stage)
      shift
      if (($#)) && [[ $1 != --* ]]; then STAGE_DIR=$1; shift; else STAGE_DIR=$ROOT/build-gpu/stage; fi
      stage "$STAGE_DIR"; exit $? ;;
    --phase) PHASE=$2; shift 2 ;;  # internal: run one phase in this process
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ $TOTAL_BUDGET =~ ^[0-9]+$ ]] || die "--budget: expected seconds"

if ((DRY)); then
  SWEEP_MAX=1M TORCH_STEPS=6 BT_FWD=10 BT_BWD=20 BT_ITERS=6 BT_WARMUP=10 BT_PAIRS=1 BT_RATE=20
  BT_VOCAB=256 SWEEP_NET_BUDGET=${GPU_E2E_SWEEP_NET_S:-30}
else
  SWEEP_MAX=256M TORCH_STEPS=20 BT_FWD=10 BT_BWD=20 BT_ITERS=12 BT_WARMUP=8 BT_PAIRS=3 BT_RATE=200
  BT_VOCAB=128256
fi
export DRY SWEEP_MAX TORCH_STEPS BT_FWD BT_BWD BT_ITERS BT_WARMUP BT_PAIRS BT_RATE BT_VOCAB
export SWEEP_NET_BUDGET GPU_E2E_DRY=$DRY GPU_E2E_BIN=$BIN

if [[ -n $PHASE ]]; then
  [[ -n ${GPU_E2E_OUT:-} ]] || die "--phase is internal"
  OUT=$GPU_E2E_OUT TAG=$GPU_E2E_TAG WAN_PREFIX=$GPU_E2E_WAN_PREFIX
  # Test seam (tests/gpu/gpu_e2e_dry_run_test.sh): GPU_E2E_TEST_DELAY_<PHASE>=S makes the phase
  # start S seconds late, so a budget test does not depend on how fast this machine is.
  delay=GPU_E2E_TEST_DELAY_${PHASE^^}
  [[ ${!delay:-0} =~ ^[0-9]+$ ]] || die "$delay: expected seconds"
  sleep "${!delay:-0}"
  "phase_$PHASE"
  exit $?
fi

OUT=${OUT_ARG:-${OUT:-$ROOT/build/gpu-e2e-$(date +%Y%m%d-%H%M%S)}}
mkdir -p "$OUT/phases" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
TAG=gpue2e$$
WAN_PREFIX=${ATLAS_WAN_PREFIX:-gpue2e}
export GPU_E2E_OUT=$OUT GPU_E2E_TAG=$TAG GPU_E2E_WAN_PREFIX=$WAN_PREFIX

cleanup() {
  if [[ -e $OUT/testbed.env ]] && grep -q MODE=netns "$OUT/testbed.env"; then
    ATLAS_WAN_PREFIX=$WAN_PREFIX "$ROOT/scripts/wan-down" --save "$OUT/testbed-final" >/dev/null 2>&1
  fi
  rm -f /dev/shm/"$TAG"* 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM

IFS=, read -r -a want <<<"${PHASES:-$(IFS=,; echo "${PHASES_ALL[*]}")}"
for p in "${want[@]}"; do
  [[ " ${PHASES_ALL[*]} " == *" $p "* ]] || die "unknown phase '$p' (${PHASES_ALL[*]})"
done
# Later phases read what setup wrote (kept in OUT) and need the testbed, which every run
# tears down at its end: add them when a rerun of some phases leaves them out.
needs_testbed=0
for p in sweep torch bubbletea; do [[ " ${want[*]} " == *" $p "* ]] && needs_testbed=1; done
((needs_testbed)) && [[ " ${want[*]} " != *" testbed "* ]] && want+=(testbed)
[[ " ${want[*]} " != *" setup "* && ! -e $OUT/runtime.env ]] && want+=(setup)

start=$SECONDS
log "out $OUT; mode $( ((DRY)) && echo 'dry run (CPU)' || echo GPU); budget ${TOTAL_BUDGET}s; phases ${want[*]}"
order=0
for p in "${PHASES_ALL[@]}"; do
  order=$((order + 1))  # the phase's place in PHASES_ALL: a rerun overwrites its status
  [[ " ${want[*]} " == *" $p "* ]] || continue
  rm -f "$OUT/phases/$p.note"
  left=$((TOTAL_BUDGET - (SECONDS - start)))
  b=${BUDGET[$p]} cut=0
  if [[ $p != report ]] && ((left - BUDGET[report] < b)); then
    b=$((left - BUDGET[report])) cut=1  # what the total budget leaves, the report's kept
  fi
  t0=$SECONDS
  if ((cut && b < 10)); then
    status=skipped; echo "over the total budget of ${TOTAL_BUDGET}s" >"$OUT/phases/$p.note"; rc=3
  else
    log "== $p (budget ${b}s)"
    timeout -k 5 "$b" "$SELF" --phase "$p" 2>&1 | tee "$OUT/phases/$p.log" >&2
    rc=${PIPESTATUS[0]}
    case $rc in
      0) status=pass ;; 3) status=skipped ;; 124|137) status=timeout ;; *) status=fail ;;
    esac
  fi
  "${PY:-python3}" - "$OUT/phases/$(printf %02d $order)-$p.json" "$p" "$status" $((SECONDS - t0)) "$b" \
    "$order" "$OUT/phases/$p.note" <<'EOF'
import json, os, sys
path, phase, status, secs, budget, order, note = sys.argv[1:]
n = open(note).read().strip().replace("\n", "; ") if os.path.exists(note) else ""
json.dump({"phase": phase, "status": status, "seconds": int(secs), "budget": int(budget),
           "order": int(order), "note": n}, open(path, "w"))
EOF
  log "== $p: $status ($((SECONDS - t0))s)"
done
log "done in $((SECONDS - start))s; $OUT/summary.md"
