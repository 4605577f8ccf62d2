#!/usr/bin/env bash
# Rebuilds the bundled default network in one command: datagen + train + quantise + checks.
#
#   bash weights/make-default-network.sh [WORKDIR]
#
# Needs: pip install -e '.[train]' (PyTorch 2.13.0, CPU), Debian's stockfish package (the teacher,
# Stockfish 15.1's network), about 12 GB of memory for training, and the project's shared/data beside the checkout
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

# ... and 16M distinct positions of activation study v3's engine-made mix (47.5 % walk, 47.5 % teacher
# self-play, 5 % games of the compiled search; research/activation-study-v3-plan.md): its chunks 0-63.
time python research/activation_study_v3.py data --out "$WORK/study" --positions 16000000

time nnue-infer train "$WORK"/positions-{1,2,3}.npz "$WORK"/selfplay-{12,13,14}.npz \
    "$WORK"/study/data/train-00{0,1,2,3,4,5}[0-9].npz "$WORK"/study/data/train-006[0-3].npz -o "$WORK/train" \
    --arch default --ft-width 512 --ft-activation bilinear --epochs 4 --batch-size 16384 --lr 8e-3 --lr-final 0.05 \
    --val-fraction 0.002 --sigmoid-scale 600 --seed 1 --threads 1 --eval-positions "$SHARED/data/positions-dev.jsonl" \
    --quiet > "$WORK/train.json"

cp "$WORK/train/network.safetensors" weights/nnue-infer-default.safetensors
cat "$WORK/train.json"
