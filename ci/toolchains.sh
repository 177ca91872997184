#!/usr/bin/env bash
# Installs NVRTC toolchains and the SASS disassembler from NVIDIA's PyPI wheels, pinned, for
# the compile-only gate and `cargo xtask toolchains` (docs/toolchains.md). No GPU needed.
#
#   ci/toolchains.sh [--dir DIR] [VERSION...]
#
# VERSION is a full NVRTC release (12.8.93): 12.x from nvidia-cuda-nvrtc-cu12, 13.x from
# nvidia-cuda-nvrtc. Without versions it installs the pinned set below (the toolchains the
# profiles name). The disassembler (nvdisasm from nvidia-cuda-nvdisasm, which reads every
# architecture's CUBIN) is always installed at its pin.
#
# Layout (DIR defaults to $ACCPROBE_TOOLCHAINS, else target/toolchains):
#   DIR/nvrtc-12.8.93/lib/libnvrtc.so.12, libnvrtc-builtins.so.12.8, libnvrtc.so -> libnvrtc.so.12
#   DIR/nvrtc-12.8.93/INSTALLED    "nvidia-cuda-nvrtc-cu12==12.8.93"
#   DIR/nvdisasm-13.2.51/bin/nvdisasm
# Only the shared libraries are kept from the wheels (no headers, no .alt variants). An
# install is reused only when its INSTALLED file names exactly the pinned distribution;
# otherwise it is removed and installed anew.
set -euo pipefail
cd "$(dirname "$0")/.."

PINNED_NVRTC=(12.4.127 12.8.93 13.0.88)
PINNED_NVDISASM=13.2.51

dir=${ACCPROBE_TOOLCHAINS:-target/toolchains}
if [ "${1:-}" = --dir ]; then
  dir=$2
  shift 2
fi
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=("${PINNED_NVRTC[@]}")
mkdir -p "$dir"

# install NAME DIST==VERSION PATTERN...: the wheel's members matching a pattern, flattened
# into DIR/NAME/{lib,bin}, unless DIR/NAME/INSTALLED already says DIST==VERSION.
install() {
  local name=$1 pin=$2
  shift 2
  local dest=$dir/$name
  if [ "$(cat "$dest/INSTALLED" 2>/dev/null)" = "$pin" ]; then
    echo "toolchains: $pin in $dest (cached)"
    return 0
  fi
  rm -rf "$dest"
  local wheels
  wheels=$(mktemp -d)
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: \
    --dest "$wheels" "$pin"
  python3 - "$wheels" "$dest" "$@" <<'PY'
import fnmatch, os, sys, zipfile
wheels, dest, patterns = sys.argv[1], sys.argv[2], sys.argv[3:]
(wheel,) = [os.path.join(wheels, w) for w in os.listdir(wheels) if w.endswith(".whl")]
found = 0
with zipfile.ZipFile(wheel) as z:
    for m in z.infolist():
        if any(fnmatch.fnmatch(m.filename, p) for p in patterns):
            sub = "bin" if "/bin/" in m.filename else "lib"
            os.makedirs(os.path.join(dest, sub), exist_ok=True)
            out = os.path.join(dest, sub, os.path.basename(m.filename))
            with z.open(m) as src, open(out, "wb") as dst:
                dst.write(src.read())
            os.chmod(out, 0o755)
            found += 1
if not found:
    sys.exit(f"{wheel}: nothing matches {patterns}")
PY
  rm -rf "$wheels"
  echo "$pin" >"$dest/INSTALLED"
  echo "toolchains: $pin installed in $dest"
}

for v in "${versions[@]}"; do
  case $v in
    12.*) dist=nvidia-cuda-nvrtc-cu12 ;;
    13.*) dist=nvidia-cuda-nvrtc ;;
    *) echo "toolchains: $v: expected an NVRTC release such as 12.8.93 or 13.0.88" >&2; exit 2 ;;
  esac
  install "nvrtc-$v" "$dist==$v" '*/lib/libnvrtc.so.*' '*/lib/libnvrtc-builtins.so.*'
  # cudarc looks for libnvrtc.so first: the folder must answer that name itself.
  soname=$(cd "$dir/nvrtc-$v/lib" && ls libnvrtc.so.* | head -n1)
  ln -sfn "$soname" "$dir/nvrtc-$v/lib/libnvrtc.so"
done
install "nvdisasm-$PINNED_NVDISASM" "nvidia-cuda-nvdisasm==$PINNED_NVDISASM" '*/bin/nvdisasm'
