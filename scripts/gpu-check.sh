#!/usr/bin/env bash
# GPU end-to-end checks of Atlas on a machine with one NVIDIA GPU (docs/gpu-check.md):
#   atlas-nccl-check        NCCL (2 ranks, 1 GPU, NCCL_NET=Atlas) through libnccl-net-atlas.so
#   bubbletea-engine-check  CUDA prefill engine vs the CPU reference (when built)
#
# Usage:
#   scripts/gpu-check.sh --stage DIR      (here, on the dev machine) build the release
#                                          binaries and copy them, with this script, into DIR
#   scripts/gpu-check.sh --prebuilt DIR   (on the GPU machine) run the checks from DIR
#   scripts/gpu-check.sh [--build]        (on a GPU machine with all build deps) build, then run
#
# The GPU machine needs: an NVIDIA driver (libcuda.so.1), python3 with the nvidia-nccl-cu13
# wheel (libnccl.so.2 under site-packages/nvidia/nccl/lib; PyTorch installs it), bash,
# coreutils (timeout), and for --build also nvcc 13, CMake, ninja and the Debian-packaged deps
# (liburing, OpenSSL, nlohmann-json, Boost headers, Google Benchmark). No network, no apt.
# Everything is bounded: the whole run finishes in under 5 minutes.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
NCCL_CHECK_TIMEOUT=${NCCL_CHECK_TIMEOUT:-150}
ENGINE_CHECK_TIMEOUT=${ENGINE_CHECK_TIMEOUT:-100}

die() { echo "gpu-check: $*" >&2; exit 2; }

# ---------------------------------------------------------------------------------------------
# Build + stage (dev machine)

build_targets() {  # src build_dir
  local src=$1 bdir=$2
  cmake -S "$src" -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATLAS_BUILD_TESTS=OFF \
        -DATLAS_BUILD_BENCHMARKS=ON -DATLAS_CUDA=ON -DATLAS_WERROR=OFF >"$bdir.configure.log" 2>&1 \
    || { tail -n 30 "$bdir.configure.log" >&2; die "cmake configure failed (log: $bdir.configure.log)"; }
  local targets=(nccl-net-atlas atlas-nccl-check)
  if ninja -C "$bdir" -t targets all 2>/dev/null | grep -q '^bubbletea-engine-check:'; then
    targets+=(bubbletea-engine-check)
  fi
  echo "gpu-check: building ${targets[*]} in $bdir" >&2
  cmake --build "$bdir" -j "${ATLAS_BUILD_JOBS:-2}" --target "${targets[@]}" \
    || die "build failed"
}

stage() {  # dest
  local dest=$1 src bdir
  src=$(cd "$here/.." && pwd)
  bdir=${ATLAS_STAGE_BUILD_DIR:-$src/build-gpu-stage}
  mkdir -p "$dest" "$(dirname "$bdir")"
  build_targets "$src" "$bdir"
  cp -f "$bdir/plugin/libnccl-net-atlas.so" "$dest/"
  cp -f "$bdir/perf/gpu-check/atlas-nccl-check" "$dest/"
  if [[ -x $bdir/perf/gpu-check/bubbletea-engine-check ]]; then
    cp -f "$bdir/perf/gpu-check/bubbletea-engine-check" "$dest/"
  fi
  cp -f "$here/gpu-check.sh" "$dest/"
  # Libraries the plugin needs that the GPU machine may lack (liburing, libcrypto, ... until
  # the plugin links them statically) travel in DIR/lib; --prebuilt puts DIR/lib on the
  # loader path. The C/C++ runtime, CUDA and NCCL come from the GPU machine.
  rm -rf "$dest/lib"
  local lib path
  for lib in $(objdump -p "$dest/libnccl-net-atlas.so" | awk '/NEEDED/ {print $2}'); do
    case $lib in
      libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*|libstdc++.so.*|\
      libgcc_s.so.*|libcuda.so.*|libcudart.so.*|libnccl.so.*) continue ;;
    esac
    path=$(ldd "$dest/libnccl-net-atlas.so" | awk -v l="$lib" '$1 == l {print $3}')
    if [[ -n $path && -e $path ]]; then
      mkdir -p "$dest/lib"
      cp -fL "$path" "$dest/lib/$lib"
    fi
  done
  {
    echo "staged: $(date -u +%FT%TZ) from $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "host: $(uname -srm), $(ldd --version 2>&1 | head -n1)"
    echo "bundled libraries: $(ls "$dest/lib" 2>/dev/null | tr '\n' ' ')"
    for f in "$dest"/libnccl-net-atlas.so "$dest"/atlas-nccl-check "$dest"/bubbletea-engine-check; do
      [[ -e $f ]] || continue
      echo "== $(basename "$f")"
      echo "   needs: $(objdump -p "$f" 2>/dev/null | awk '/NEEDED/ {printf "%s ", $2}')"
      echo "   newest glibc symbol: $(objdump -T "$f" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n1)"
    done
  } >"$dest/MANIFEST.txt"
  cat "$dest/MANIFEST.txt"
  echo "gpu-check: staged into $dest; on the GPU machine run: $dest/gpu-check.sh --prebuilt $dest"
}

# ---------------------------------------------------------------------------------------------
# Run (GPU machine)

# Directories holding the pip CUDA libraries (nvidia/nccl/lib first), one per line.
pip_nvidia_libdirs() {
  python3 - <<'EOF' 2>/dev/null
import glob, os, site, sys
roots = []
try:
    roots += site.getsitepackages()
except Exception:
    pass
try:
    roots.append(site.getusersitepackages())
except Exception:
    pass
roots += [p for p in sys.path if p.endswith("-packages")]
try:
    import nvidia.nccl
    for p in nvidia.nccl.__path__:
        print(os.path.join(p, "lib"))
except Exception:
    pass
seen = set()
for r in roots:
    for d in sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib"))):
        if d not in seen:
            seen.add(d)
            print(d)
EOF
}

find_nccl_dir() {
  local d
  while read -r d; do
    if [[ -e $d/libnccl.so.2 ]]; then echo "$d"; return 0; fi
  done < <(pip_nvidia_libdirs)
  # Fallbacks: a find under the usual python prefixes, then the system loader / toolkit.
  d=$(find /usr/lib/python3* /usr/local/lib/python3* /opt /root/.local -path '*nvidia/nccl/lib/libnccl.so.2' \
        2>/dev/null | head -n1)
  if [[ -n $d ]]; then dirname "$d"; return 0; fi
  d=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 / {print $NF; exit}')
  if [[ -n $d ]]; then dirname "$d"; return 0; fi
  [[ -e /usr/local/cuda/lib64/libnccl.so.2 ]] && { echo /usr/local/cuda/lib64; return 0; }
  return 1
}

run_checks() {  # dir
  local dir results=() rc_all=0 t0
  dir=$(cd "$1" && pwd) || die "no such directory: $1"
  t0=$(date +%s)
  [[ -x $dir/atlas-nccl-check && -e $dir/libnccl-net-atlas.so ]] \
    || die "$dir must hold atlas-nccl-check and libnccl-net-atlas.so (see --stage)"
  echo "== GPU"
  if command -v nvidia-smi >/dev/null; then
    timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
      || echo "nvidia-smi failed"
  else
    echo "nvidia-smi not found"
  fi
  local nccl_dir extra
  nccl_dir=$(find_nccl_dir) || die "libnccl.so.2 not found (pip install nvidia-nccl-cu13, or set LD_LIBRARY_PATH)"
  # The nccl wheel first, then the other pip CUDA libraries (cuBLAS etc. for the engine check).
  extra=$(pip_nvidia_libdirs | grep -v "^$nccl_dir\$" | paste -sd: -)
  export LD_LIBRARY_PATH="$nccl_dir${extra:+:$extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # Libraries staged next to the plugin (see stage()).
  [[ -d $dir/lib ]] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$dir/lib"
  echo "== libnccl.so.2 from $nccl_dir"
  for b in "$dir"/atlas-nccl-check "$dir"/libnccl-net-atlas.so "$dir"/bubbletea-engine-check; do
    [[ -e $b ]] || continue
    if ldd "$b" 2>/dev/null | grep -q 'not found'; then
      echo "   $(basename "$b"): missing libraries:"; ldd "$b" | grep 'not found' | sed 's/^/      /'
    fi
  done

  echo "== atlas-nccl-check (timeout ${NCCL_CHECK_TIMEOUT}s)"
  mkdir -p "$dir/logs"
  timeout -k 5 "$NCCL_CHECK_TIMEOUT" "$dir/atlas-nccl-check" --plugin "$dir/libnccl-net-atlas.so" \
      --logdir "$dir/logs" --timeout $((NCCL_CHECK_TIMEOUT - 20))
  local rc=$?
  results+=("atlas-nccl-check $( ((rc == 0)) && echo PASS || echo "FAIL(rc=$rc)")")
  ((rc == 0)) || rc_all=1
  if ((rc != 0)); then
    for f in "$dir"/logs/nccl-rank*.log; do
      [[ -e $f ]] || continue
      echo "-- last lines of $f"; grep -E 'WARN|NET/|Atlas' "$f" | tail -n 15
    done
  fi

  if [[ -x $dir/bubbletea-engine-check ]]; then
    echo "== bubbletea-engine-check (timeout ${ENGINE_CHECK_TIMEOUT}s)"
    timeout -k 5 "$ENGINE_CHECK_TIMEOUT" "$dir/bubbletea-engine-check"
    rc=$?
    results+=("bubbletea-engine-check $( ((rc == 0)) && echo PASS || echo "FAIL(rc=$rc)")")
    ((rc == 0)) || rc_all=1
  else
    results+=("bubbletea-engine-check not-present")
  fi

  echo "== summary ($(($(date +%s) - t0)) s)"
  printf '   %s\n' "${results[@]}"
  return $rc_all
}

case ${1:-} in
  --stage) [[ -n ${2:-} ]] || die "--stage needs a directory"; stage "$2" ;;
  --prebuilt) [[ -n ${2:-} ]] || die "--prebuilt needs a directory"; run_checks "$2" ;;
  --build|"")
    src=$(cd "$here/.." && pwd)
    out=${ATLAS_GPU_CHECK_DIR:-$src/build-gpu-stage/out}
    ATLAS_STAGE_BUILD_DIR=${ATLAS_STAGE_BUILD_DIR:-$src/build-gpu-stage} stage "$out" && run_checks "$out" ;;
  -h|--help) sed -n '2,18p' "$0" ;;
  *) die "unknown argument '$1' (--stage DIR | --prebuilt DIR | --build)" ;;
esac
