"""BinaryRow codec (being written). Placeholder constant so other modules import."""

EMPTY_ROW_BYTES = b"\x00\x00\x00\x00" + b"\x00" * 8
