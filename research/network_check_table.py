"""The table of ``nnue-infer check`` over every known network, for docs/network-tools.md.

For each network: its worst-case accumulator range (int16 overflow possible in how many neurons),
PSQT safety, first-layer weights at ±127, and on the dev corpus (3,298 positions): dead output neurons,
zero bytes and all-zero 4-byte chunks of the feature-transformer output, and the chunks after a
permutation fitted on the first 4,000 positions of ``binpack/selfplay.binpack`` (other games).

    python research/network_check_table.py            # print the table (networks not in the cache: skipped)
    python research/network_check_table.py --write    # and replace it in docs/network-tools.md
"""

from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nnue_infer.errors import NetworkNotFoundError  # noqa: E402
from nnue_infer.formats.registry import KNOWN_NETWORKS  # noqa: E402
from nnue_infer.inspection.check import check  # noqa: E402
from nnue_infer.inspection.permutation import permute, zero_chunk_share  # noqa: E402
from nnue_infer.inspection.positions import read_positions  # noqa: E402
from nnue_infer.resources import default_network, known_network  # noqa: E402

START, END = "<!-- network-check-table:start -->", "<!-- network-check-table:end -->"
DOC = ROOT / "docs" / "network-tools.md"


def shared_data() -> pathlib.Path:
    """The shared data directory (``../shared/data`` beside the clone, or ``/work/shared/data``)."""
    for candidate in (ROOT.parent / "shared" / "data", pathlib.Path("/work/shared/data")):
        if candidate.is_dir():
            return candidate
    raise SystemExit("shared/data not found beside the clone")


def rows() -> list[str]:
    data = shared_data()
    corpus = read_positions(data / "positions-dev.jsonl")
    fit = read_positions(data / "binpack" / "selfplay.binpack", limit=4000)
    specs: dict[str, list[str]] = {}  # sha256 -> the specs of that file (17.1's and 18's small net are one)
    for k in KNOWN_NETWORKS:
        specs.setdefault(k.sha256, []).append(k.spec)
    nets = [("`default`", default_network)] + [(", ".join(f"`{s}`" for s in names), lambda s=names[0]: known_network(s))
                                               for names in specs.values()]
    out = ["| network | L1 | accumulator worst case | int16 overflow possible | PSQT int32 | fc_0 weights at ±127 "
           "| dead neurons | zero bytes | zero chunks | zero chunks, permuted |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for spec, get in nets:
        try:
            net = get()
        except NetworkNotFoundError as exc:
            print(f"{spec}: skipped ({exc})", file=sys.stderr)
            continue
        r = check(net, corpus)
        fc0 = next(t for t in r.limits if t["tensor"] == "layers.0.weights")
        permuted = permute(net, fit.bitboards, fit.stm).network
        after = zero_chunk_share(permuted, corpus.bitboards, corpus.stm)
        d = r.data
        over = len(r.int16_overflow)
        out.append(f"| {spec} | {net.architecture.ft_width} | {int(r.accumulator_low.min())} .. "
                   f"{int(r.accumulator_high.max())} | {f'**{over} neurons**' if over else 'no'} | "
                   f"{'overflow' if r.psqt_overflow else 'safe'} | {100 * fc0['share']:.3f} % | "
                   f"{len(d['dead_neurons'])} | {100 * d['zero_byte_share']:.1f} % | "
                   f"{100 * d['zero_chunk_share']:.1f} % | {100 * after:.1f} % |")
        print(out[-1], file=sys.stderr)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help=f"replace the table in {DOC.relative_to(ROOT)}")
    args = parser.parse_args()
    table = "\n".join(rows())
    print(table)
    if args.write:
        text = DOC.read_text()
        head, rest = text.split(START)
        _, tail = rest.split(END)
        DOC.write_text(f"{head}{START}\n{table}\n{END}{tail}")


if __name__ == "__main__":
    main()
