"""ALBERT model configuration: the original albert_config.json, presets, validation.

`AlbertConfig` reads and writes the release's `albert_config.json` unchanged and adds
one key, `sharing`, selecting which sub-layers are shared across layers (paper Table 5):

- "all": attention and feed-forward shared (ALBERT).
- "attention": attention shared, feed-forward per layer.
- "ffn": feed-forward shared, attention per layer.
- "none": nothing shared (BERT).

Layer routing follows the original release (`group_of_layer`, `routing`); a key that is
neither a field nor one of the release's `LEGACY_KEYS` is an error (`from_dict`).
Use: README.md, "Using the model".
"""

import copy
import dataclasses
import logging
import os

from albert_tf.storage import atomic
from albert_tf.storage.json_files import read_json

logger = logging.getLogger("albert_tf")

SHARING_MODES = ("all", "attention", "ffn", "none")

# Activations the original configs name. "gelu" is the tanh approximation there.
ACTIVATIONS = ("gelu", "gelu_new", "gelu_exact", "relu", "tanh", "swish", "silu", "linear")

# Keys of the original albert_config.json that have no effect in the released models.
LEGACY_KEYS = ("down_scale_factor", "gap_size", "net_structure_type", "num_memory_blocks", "layers_to_keep")

_reported_legacy_keys = set()


@dataclasses.dataclass
class AlbertConfig:
    """Hyper-parameters of an ALBERT (or BERT) encoder.

    Args:
        vocab_size: int. V, rows of the word embedding table.
        embedding_size: int. E, width of the factorized embeddings.
        hidden_size: int. H, width of the transformer.
        num_hidden_layers: int. L, outer layers applied.
        num_hidden_groups: int. G, groups of shared blocks; divides L.
        inner_group_num: int. k, blocks per group, applied in order per outer layer.
        num_attention_heads: int. Heads; divides H.
        intermediate_size: int. I, feed-forward width.
        hidden_act: str. One of `ACTIVATIONS`; "gelu" is the tanh approximation.
        hidden_dropout_prob: float. Dropout on embeddings and sub-layer outputs.
        attention_probs_dropout_prob: float. Dropout on attention probabilities.
        max_position_embeddings: int. Rows of the position table; longest sequence.
        type_vocab_size: int. Segment ids.
        initializer_range: float. Stddev of the truncated-normal initializer.
        sharing: str. One of `SHARING_MODES`.
    """

    vocab_size: int = 30000
    embedding_size: int = 128
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_hidden_groups: int = 1
    inner_group_num: int = 1
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    sharing: str = "all"

    def __post_init__(self):
        self.validate()

    # --- validation -------------------------------------------------------------------
    def validate(self):
        """Raises ValueError naming the offending key."""
        positive = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_hidden_groups",
                    "inner_group_num", "num_attention_heads", "intermediate_size", "max_position_embeddings",
                    "type_vocab_size")
        for key in positive:
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"AlbertConfig: `{key}` must be a positive integer, got {value!r}.")
        for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, key)
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ValueError(f"AlbertConfig: `{key}` must be in [0, 1), got {value!r}.")
        if not isinstance(self.initializer_range, (int, float)) or self.initializer_range <= 0:
            raise ValueError(f"AlbertConfig: `initializer_range` must be positive, got {self.initializer_range!r}.")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"AlbertConfig: `hidden_size` ({self.hidden_size}) must be divisible by "
                             f"`num_attention_heads` ({self.num_attention_heads}).")
        if self.num_hidden_layers % self.num_hidden_groups:
            raise ValueError(f"AlbertConfig: `num_hidden_layers` ({self.num_hidden_layers}) must be divisible "
                             f"by `num_hidden_groups` ({self.num_hidden_groups}).")
        for key, known in (("hidden_act", ACTIVATIONS), ("sharing", SHARING_MODES)):
            if getattr(self, key) not in known:
                raise ValueError(f"AlbertConfig: unknown `{key}` {getattr(self, key)!r}; expected one of "
                                 f"{', '.join(known)}.")

    # --- derived ------------------------------------------------------------------------
    @property
    def head_size(self):
        return self.hidden_size // self.num_attention_heads

    @property
    def has_embedding_projection(self):
        """The original has the E->H projection only when E != H."""
        return self.embedding_size != self.hidden_size

    def group_of_layer(self, layer_index):
        """Group used by outer layer `layer_index`, as `int(i / L * G)` in the release."""
        return int(layer_index / self.num_hidden_layers * self.num_hidden_groups)

    def routing(self):
        """Which sub-layers each outer layer applies: its group's `inner_group_num` blocks in order.

        Returns:
            A list of L lists, each of k `(attention_key, ffn_key)` pairs, applied in order.
            A key is `("group", g, inner)` for a shared sub-layer and `("layer", i, inner)`
            for an unshared one.
        """
        share_attention = self.sharing in ("all", "attention")
        share_ffn = self.sharing in ("all", "ffn")
        table = []
        for i in range(self.num_hidden_layers):
            g = self.group_of_layer(i)
            steps = []
            for k in range(self.inner_group_num):
                attention_key = ("group", g, k) if share_attention else ("layer", i, k)
                ffn_key = ("group", g, k) if share_ffn else ("layer", i, k)
                steps.append((attention_key, ffn_key))
            table.append(steps)
        return table

    # --- (de)serialization --------------------------------------------------------------
    @classmethod
    def from_dict(cls, values, source="config"):
        """Builds a config from a dict of original keys.

        The release's legacy keys (`LEGACY_KEYS`, without effect in the released models)
        are accepted and reported once per source. Any other key that is not a field is
        an error: a misspelled key must not silently give a default model.

        Raises:
            ValueError: naming `source` (the file), the unknown keys and the known ones.
        """
        if isinstance(values, AlbertConfig):
            return copy.deepcopy(values)
        if not isinstance(values, dict):
            raise ValueError(f"{source}: expected a JSON object, got {type(values).__name__}.")
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(str(k) for k in values if k not in known and k not in LEGACY_KEYS)
        if unknown:
            raise ValueError(f"{source}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; known "
                             f"keys: {', '.join(known)} (and the release's legacy keys, ignored: "
                             f"{', '.join(LEGACY_KEYS)}).")
        legacy = tuple(k for k in sorted(values) if k in LEGACY_KEYS and (source, k) not in _reported_legacy_keys)
        if legacy:
            _reported_legacy_keys.update((source, k) for k in legacy)
            logger.warning("%s: ignoring legacy keys without effect: %s", source, ", ".join(legacy))
        kwargs = {k: v for k, v in values.items() if k in known}
        try:
            return cls(**kwargs)
        except ValueError as e:
            raise ValueError(f"{source}: {e}") from None

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_json_file(cls, path):
        """Reads an original `albert_config.json` (or one written by `to_json_file`)."""
        path = os.fspath(path)
        values = read_json(path, "an albert_config.json (the model's settings)")
        return cls.from_dict(values, source=path)

    def to_json_file(self, path):
        """Writes the config as JSON, atomically (`albert_tf.storage.atomic`)."""
        return atomic.write_json(os.fspath(path), self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_preset(cls, name):
        """One of `PRESETS`: albert_{base,large,xlarge,xxlarge}[_v1], bert_*, albert_tiny."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; expected one of {', '.join(PRESETS)}.")
        return cls(**PRESETS[name])

    def replace(self, **changes):
        """A copy with some keys changed (validated)."""
        return dataclasses.replace(self, **changes)


def _albert(hidden, layers, heads, intermediate, dropout, **changes):
    """A preset's keys: AlbertConfig's defaults (albert_base's vocabulary, embeddings and
    positions) with these sizes and dropout."""
    return AlbertConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=intermediate, hidden_dropout_prob=dropout,
                        attention_probs_dropout_prob=dropout, **changes).to_dict()


_SIZES = {
    "base": (768, 12, 12, 3072),
    "large": (1024, 24, 16, 4096),
    "xlarge": (2048, 24, 16, 8192),
    "xxlarge": (4096, 12, 64, 16384),
}

PRESETS = {}
for _size, _dims in _SIZES.items():
    PRESETS[f"albert_{_size}"] = _albert(*_dims, dropout=0.0)  # v2: no dropout
    PRESETS[f"albert_{_size}_v1"] = _albert(*_dims, dropout=0.0 if _size == "xxlarge" else 0.1)
for _size in ("base", "large", "xlarge"):
    PRESETS[f"bert_{_size}"] = _albert(*_SIZES[_size], dropout=0.1, embedding_size=_SIZES[_size][0], sharing="none")
PRESETS["albert_tiny"] = _albert(32, 4, 4, 64, dropout=0.1, vocab_size=1000, embedding_size=16, num_hidden_groups=2,
                                 max_position_embeddings=128)
