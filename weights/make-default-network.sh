#!/usr/bin/env bash
# Rebuilds the bundled default network in one command: datagen + train + quantise + checks.
#
#   bash weights/make-default-network.sh [WORKDIR]
#
# Needs: pip install -e '.[train]' (PyTorch 2.13.0, CPU), Debian's stockfish package (the teacher,
# Stockfish 15.1's network), and the project's shared/data beside the checkout
# ($NNUE_INFER_SHARED overrides). Single process, single thread; deterministic for the seeds below.
# Writes WORKDIR (default: distil-run/) and replaces weights/nnue-infer-default.safetensors.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${NNUE_INFER_SHARED:-../shared}
WORK=${1:-distil-run}
mkdir -p "$WORK"
GAMES=(--games "$SHARED/data/games-dev.jsonl" --exclude "$SHARED/data/positions-dev.jsonl")

# 5M positions, half perturbations of the dev games, half playouts; then 4M more, 3/4 playouts.
time nnue-infer datagen -o "$WORK/positions-1.npz" -n 5000000 --seed 1 "${GAMES[@]}" --quiet > "$WORK/datagen-1.json"
time nnue-infer datagen -o "$WORK/positions-2.npz" -n 4000000 --seed 2 --perturbation-fraction 0.25 "${GAMES[@]}" \
    --quiet > "$WORK/datagen-2.json"

time nnue-infer train "$WORK/positions-1.npz" "$WORK/positions-2.npz" -o "$WORK/train" --arch default --epochs 10 \
    --batch-size 4096 --lr 5e-3 --lr-final 0.02 --val-fraction 0.01 --sigmoid-scale 600 --seed 1 --threads 1 \
    --eval-positions "$SHARED/data/positions-dev.jsonl" --quiet > "$WORK/train.json"

cp "$WORK/train/network.safetensors" weights/nnue-infer-default.safetensors
cat "$WORK/train.json"
