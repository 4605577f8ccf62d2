"""Known Stockfish networks: name, SHA-256, Stockfish version, role, and where to get them.

Every network here was extracted from the engine named in ``source`` and checked by its
SHA-256 (a Stockfish network's name is ``nn-`` + the first 12 hex digits of it).  The npm
package ``stockfish`` (GPL-3.0; Stockfish compiled to WebAssembly) ships them;
``npm pack stockfish@VERSION`` downloads its tarball (see :mod:`nnue_infer.resources`).

Source: the engines' own ``info string NNUE evaluation using ...`` lines, and Stockfish's
``evaluate.h`` (``EvalFileDefaultName*``) at tags sf_16, sf_17.1, sf_18.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KnownNetwork:
    """One known network.

    Attributes
    ----------
    spec : str
        Name accepted by :func:`nnue_infer.resources.network_from_spec` (e.g. ``"sf17.1-small"``).
    name : str
        Stockfish's file name, ``nn-<12 hex>.nnue``.
    sha256 : str
        SHA-256 of the file (hex).
    size : int
        Bytes.
    version : str
        The Stockfish version whose numbers and ``eval`` text it is used with (``"16"``, ``"17.1"``, ...).
    role : str
        ``"big"``, ``"small"`` or ``"lite"`` (the single net of the package's lite engines).
    npm : str
        Version of the npm package ``stockfish`` that ships it (``npm pack stockfish@<npm>``).
    source : str
        File of that package it is taken from (a ``.nnue`` file or a ``.wasm`` module, whose
        split parts are read together).
    shape : str
        The engine's own shape line (inputs, L1, fc_0 outputs, fc_1 outputs, 1).
    """

    spec: str
    name: str
    sha256: str
    size: int
    version: str
    role: str
    npm: str
    source: str
    shape: str


#: Stockfish 15.1 (Debian's ``stockfish`` package embeds it; see ``resources.stockfish_15_1_network``).
SF15_1 = KnownNetwork("sf15.1", "nn-ad9b42354671.nnue",
                      "ad9b423546714137916bd38978af6fd68d7b8951bef25ff76bf43da72d6cb786", 47_001_499, "15.1", "big",
                      "", "/usr/games/stockfish", "(22528, 1024, 15, 32, 1)")

KNOWN_NETWORKS: tuple[KnownNetwork, ...] = (
    SF15_1,
    KnownNetwork("sf16", "nn-5af11540bbfe.nnue", "5af11540bbfefcb54e38c5dd000cab4b469dfa7599a1d55be5d2722c20a8929b",
                 40_119_326, "16", "big", "16.0.0",
                 "package/src/nn-5af11540bbfe.nnue", "(22528, 1536, 15, 32, 1)"),
    KnownNetwork("sf17.1", "nn-1c0000000000.nnue", "1c0000000000a67d629999d932d0c373f7450ce43cd12d0562868f4eaf9ae2ad",
                 74_874_478, "17.1", "big", "17.1.0",
                 "package/src/stockfish-17.1-single-a496a04-part-0.wasm", "(22528, 3072, 15, 32, 1)"),
    KnownNetwork("sf17.1-small", "nn-37f18f62d772.nnue", "37f18f62d772f3107e1d6aaca3898c130c3c86f2ab63e6555fbbca20635a899d",
                 3_519_630, "17.1", "small", "17.1.0",
                 "package/src/stockfish-17.1-single-a496a04-part-0.wasm", "(22528, 128, 15, 32, 1)"),
    KnownNetwork("sf17.1-lite", "nn-9067e33176e8.nnue", "9067e33176e8c5edb7aa8db6a3aedd012f84a1f39872e86357c6c2d0993f314d",
                 6_617_595, "17.1", "lite", "17.1.0",
                 "package/src/stockfish-17.1-lite-single-03e3232.wasm", "(22528, 256, 15, 32, 1)"),
    KnownNetwork("sf18-small", "nn-37f18f62d772.nnue", "37f18f62d772f3107e1d6aaca3898c130c3c86f2ab63e6555fbbca20635a899d",
                 3_519_630, "18", "small", "18.0.8",
                 "package/bin/stockfish-18-single.wasm", "(22528, 128, 15, 32, 1)"),
    KnownNetwork("sf18-lite", "nn-9067e33176e8.nnue", "9067e33176e8c5edb7aa8db6a3aedd012f84a1f39872e86357c6c2d0993f314d",
                 6_617_595, "18", "lite", "18.0.8",
                 "package/bin/stockfish-18-lite-single.wasm", "(22528, 256, 15, 32, 1)"),
    KnownNetwork("sf18", "nn-c288c895ea92.nnue", "c288c895ea924429ea9092e3f36b2b3c1f00f2a3a4c759ff7e57e79e3b43e4a7",
                 108_919_594, "18", "big", "18.0.8",
                 "package/bin/stockfish-18-single.wasm", "(102384, 1024, 15, 32, 1)"),
    KnownNetwork("sf19", "nn-1a298aa575a0.nnue", "1a298aa575a085434d29027978dc36867fe9c5bcea9376654b7a8eba1e52dfc2",
                 98_511_183, "19", "big", "19.0.0",
                 "package/bin/stockfish-19-single.wasm", "(86896, 1024, 32, 32, 1)"),
    KnownNetwork("sf19-lite", "nn-61e7af4bb97d.nnue",
                 "61e7af4bb97d51eeeb25d322916f86513b5cd3a827ce189c98c6e31946f99e5b", 1_166_381, "19", "lite", "19.0.0",
                 "package/bin/stockfish-19-lite-single.wasm", "(768, 1024, 32, 32, 1)"),
)

#: Other names for specs.
ALIASES = {"stockfish": "sf15.1", "sf15": "sf15.1", "sf17": "sf17.1", "sf17.1-big": "sf17.1", "sf16-big": "sf16"}


def known_by_spec(spec: str) -> KnownNetwork | None:
    """The known network a spec names (``"sf17.1-small"``, aliases included), or None."""
    spec = ALIASES.get(spec.lower(), spec.lower())
    return next((k for k in KNOWN_NETWORKS if k.spec == spec), None)


def known_by_sha256(sha256: str) -> list[KnownNetwork]:
    """Known networks with this SHA-256 (one file may serve several versions, e.g. the lite net)."""
    return [k for k in KNOWN_NETWORKS if k.sha256 == sha256]


def version_for_sha256(sha256: str) -> str | None:
    """The Stockfish version a known network is first used with (None if unknown)."""
    found = known_by_sha256(sha256)
    return found[0].version if found else None


def specs() -> list[str]:
    """All spec names, in table order."""
    return [k.spec for k in KNOWN_NETWORKS]
