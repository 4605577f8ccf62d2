"""Constants of the Stockfish 15.1 NNUE network and its file format.

Every value names its source.  Unless stated otherwise the source is the
``sf_15.1`` tag of Stockfish, ``src/nnue/`` (see also
``shared/reference/stockfish-15.1-nnue.md`` in the project).
"""

from __future__ import annotations

#: File format version, first u32 of a ``.nnue`` file (``nnue_common.h``: ``Version``), Stockfish 12-18.
SF_FILE_VERSION = 0x7AF32F20
#: The same in Stockfish 19 (``shared/reference/stockfish-19-nnue.md`` section 2).
SF19_FILE_VERSION = 0x6A448AFA

#: Hash of the HalfKAv2_hm feature set (``features/half_ka_v2_hm.h``: ``HashValue``).
HALFKAV2_HM_HASH = 0x7F234CB8

#: Seed of the layer-stack hash: the hash of the ``InputSlice`` layer
#: (``layers/input_slice.h``), XORed with the slice width in bytes.
SF_INPUT_SLICE_HASH = 0xEC42E90D

#: Affine-transform hash seed (``layers/affine_transform.h``): ``0xCC03DAE4 + outputs``.
SF_AFFINE_HASH = 0xCC03DAE4

#: ClippedReLU hash seed (``layers/clipped_relu.h``): ``0x538D24C7 + previous``.
SF_CLIPPED_RELU_HASH = 0x538D24C7

#: Name and SHA-256 of the network embedded in Stockfish 15.1 (``evaluate.h``:
#: ``EvalFileDefaultName``).  The name is ``nn-`` + first 12 hex digits of the SHA-256.
SF15_1_NET_NAME = "nn-ad9b42354671.nnue"
SF15_1_NET_SHA256 = "ad9b423546714137916bd38978af6fd68d7b8951bef25ff76bf43da72d6cb786"
SF15_1_NET_SIZE = 47_001_499

#: Where Debian's ``stockfish`` package (15.1-4) installs the engine.
DEBIAN_STOCKFISH = "/usr/games/stockfish"

#: Feature-transformer width per perspective (``nnue_architecture.h``: ``TransformedFeatureDimensions``).
SF_L1 = 1024
#: First hidden layer outputs; the last one is the forward skip (``FC_0_OUTPUTS = 15`` + 1).
SF_L2 = 15
#: Second hidden layer outputs (``FC_1_OUTPUTS``).
SF_L3 = 32
#: Number of PSQT buckets and of layer stacks (``PSQTBuckets``, ``LayerStacks``).
SF_BUCKETS = 8

#: Divisor from the network output to internal units (``nnue_common.h``: ``OutputScale``).
OUTPUT_SCALE = 16
#: Dense layers shift their int32 sums right by this (``nnue_common.h``: ``WeightScaleBits``).
WEIGHT_SCALE_BITS = 6
#: Feature-transformer activation clamp (QA) and the shift after the pairwise product.
FT_CLAMP = 127
FT_SHIFT = 7
#: Internal units per 1.0 of the float network's output: the 600 of the forward skip below and
#: nnue-pytorch's ``nnue2score`` (``serialize.py``/``model.py``), with which Stockfish 15.1's nets were trained.
SF_OUTPUT_UNITS = 600
#: Forward skip: ``fwdOut = z[15] * (600 * OutputScale) / (127 * (1 << WeightScaleBits))``
#: (``nnue_architecture.h``: ``propagate``).
SF_SKIP_NUMERATOR = SF_OUTPUT_UNITS * OUTPUT_SCALE
SF_SKIP_DENOMINATOR = 127 * (1 << WEIGHT_SCALE_BITS)

#: Internal units per pawn in the printed output (``uci.h``: ``NormalizeToPawnValue``).
NORMALIZE_TO_PAWN_VALUE = 361
