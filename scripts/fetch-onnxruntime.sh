#!/usr/bin/env bash
# Fetches the ONNX Runtime shared library that the onnx device loads.
# The npm package onnxruntime-node ships it inside its tarball; only that one
# file is extracted (no install scripts run). Usage:
#   scripts/fetch-onnxruntime.sh [DEST_DIR]     (default: .onnxruntime)
# then point DRAINPIPE_ONNXRUNTIME at DEST_DIR/libonnxruntime.so.1, or leave
# it at the default place, where the tests and the CLI look.
set -euo pipefail
version=1.30.0
dest=${1:-"$(cd "$(dirname "$0")/.." && pwd)/.onnxruntime"}
lib="$dest/libonnxruntime.so.1"
if [ -f "$lib" ]; then
  echo "$lib"; exit 0
fi
mkdir -p "$dest"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "onnxruntime-node@$version" >/dev/null)
tar -xzf "$work/onnxruntime-node-$version.tgz" -C "$work" package/bin/napi-v6/linux/x64/libonnxruntime.so.1
mv "$work/package/bin/napi-v6/linux/x64/libonnxruntime.so.1" "$lib"
echo "$lib"
