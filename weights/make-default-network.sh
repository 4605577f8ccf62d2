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
export NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1

# 15M positions of datagen's perturbations of the dev games and playouts (3 x 5M, half each) ...
for seed in 1 2 3; do
    time nnue-infer datagen -o "$WORK/positions-$seed.npz" -n 5000000 --seed $seed "${GAMES[@]}" --threads 1 --quiet \
        > "$WORK/datagen-$seed.json"
done
# ... and 15M from the teacher's own games (3 x 5M): half of them start at a dev-game position, a
# fifth at a random endgame, the rest at the standard position.
for seed in 12 13 14; do
    time nnue-infer datagen --selfplay --endgame-fraction 0.2 -o "$WORK/selfplay-$seed.npz" -n 5000000 --seed $seed \
        "${GAMES[@]}" --threads 1 --quiet > "$WORK/selfplay-$seed.json"
done

time nnue-infer train "$WORK"/positions-{1,2,3}.npz "$WORK"/selfplay-{12,13,14}.npz -o "$WORK/train" --arch default \
    --epochs 6 --batch-size 16384 --lr 8e-3 --lr-final 0.05 --val-fraction 0.01 --sigmoid-scale 600 --seed 1 \
    --threads 1 --eval-positions "$SHARED/data/positions-dev.jsonl" --quiet > "$WORK/train.json"

cp "$WORK/train/network.safetensors" weights/nnue-infer-default.safetensors
cat "$WORK/train.json"
