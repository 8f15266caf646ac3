import json
import logging
import os

import pytest

from albert_tf import AlbertConfig
from albert_tf.modeling import config as config_lib

# The release's albert_base v2 albert_config.json, key for key.
ORIGINAL_BASE_V2 = {
    "attention_probs_dropout_prob": 0,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0,
    "embedding_size": 128,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "num_hidden_groups": 1,
    "net_structure_type": 0,
    "gap_size": 0,
    "num_memory_blocks": 0,
    "inner_group_num": 1,
    "down_scale_factor": 1,
    "type_vocab_size": 2,
    "vocab_size": 30000,
}

CONFIGS_DIR = os.path.join(os.path.dirname(__file__), "..", "configs")


def test_reads_original_config_and_reports_legacy_keys_once(tmp_path, caplog):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps(ORIGINAL_BASE_V2))
    with caplog.at_level(logging.WARNING, logger="albert_tf"):
        config = AlbertConfig.from_json_file(path)
        again = AlbertConfig.from_json_file(path)
    assert config == again == AlbertConfig.from_preset("albert_base")
    reports = [r for r in caplog.records if "legacy" in r.getMessage()]
    assert len(reports) == 1
    for key in ("down_scale_factor", "gap_size", "net_structure_type", "num_memory_blocks"):
        assert key in reports[0].getMessage()


def test_misspelled_key_is_an_error_naming_file_key_and_known_keys(tmp_path):
    path = tmp_path / "albert_config.json"
    values = dict(ORIGINAL_BASE_V2)
    values["num_hiden_layers"] = values.pop("num_hidden_layers")  # a typo: not a 12-layer default
    path.write_text(json.dumps(values))
    with pytest.raises(ValueError) as error:
        AlbertConfig.from_json_file(path)
    message = str(error.value)
    assert message.startswith(f"{path}: unknown key num_hiden_layers;")
    known = message.split("known keys:")[1]
    for key in ("num_hidden_layers", "hidden_size", "sharing", "initializer_range"):
        assert key in known
    assert "down_scale_factor" in known  # the legacy keys are named as accepted


def test_every_unknown_key_is_named(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(dict(ORIGINAL_BASE_V2, hiden_size=512, layer_norm_eps=1e-5)))
    with pytest.raises(ValueError, match=r"c.json: unknown keys hiden_size, layer_norm_eps; known keys: "):
        AlbertConfig.from_json_file(path)
    # dicts given to the models are checked the same way
    with pytest.raises(ValueError, match=r"config: unknown key vocab; known keys: vocab_size, "):
        AlbertConfig.from_dict(dict(config_lib.PRESETS["albert_tiny"], vocab=10))


def test_every_legacy_key_is_accepted_and_ignored():
    values = dict(config_lib.PRESETS["albert_tiny"], **{k: 0 for k in config_lib.LEGACY_KEYS})
    assert AlbertConfig.from_dict(values, source="legacy-test") == AlbertConfig.from_preset("albert_tiny")


def test_to_json_file_writes_through_atomic(tmp_path, monkeypatch):
    from albert_tf.storage import atomic

    calls = []
    real = atomic.write_json
    monkeypatch.setattr(atomic, "write_json", lambda path, obj, **kw: calls.append(path) or real(path, obj, **kw))
    path = tmp_path / "new" / "albert_config.json"  # the directory is made too
    AlbertConfig.from_preset("albert_tiny").to_json_file(path)
    assert calls == [str(path)]
    assert json.loads(path.read_text()) == AlbertConfig.from_preset("albert_tiny").to_dict()


def test_json_round_trip(tmp_path):
    config = AlbertConfig.from_preset("albert_large").replace(sharing="ffn")
    path = tmp_path / "c.json"
    config.to_json_file(path)
    assert AlbertConfig.from_json_file(path) == config
    assert not [p for p in os.listdir(tmp_path) if "tmp" in p]


@pytest.mark.parametrize(
    "changes, key",
    [
        (dict(hidden_size=30, num_attention_heads=4), "num_attention_heads"),
        (dict(num_hidden_layers=5, num_hidden_groups=2), "num_hidden_groups"),
        (dict(hidden_act="gelu_fast"), "hidden_act"),
        (dict(sharing="some"), "sharing"),
        (dict(vocab_size=0), "vocab_size"),
        (dict(hidden_dropout_prob=1.5), "hidden_dropout_prob"),
    ],
)
def test_invalid_configs_name_the_key(changes, key):
    values = dict(config_lib.PRESETS["albert_tiny"], **changes)
    with pytest.raises(ValueError, match=key):
        AlbertConfig(**values)


def test_bad_json_file_names_path_and_line(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{\n "vocab_size": 30000,\n oops\n}')
    with pytest.raises(ValueError, match=r"broken.json:3"):
        AlbertConfig.from_json_file(path)
    with pytest.raises(ValueError, match="does not exist"):
        AlbertConfig.from_json_file(tmp_path / "missing.json")


def test_invalid_value_in_file_names_file(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(dict(ORIGINAL_BASE_V2, hidden_act="swiglu")))
    with pytest.raises(ValueError, match=r"c.json: .*hidden_act"):
        AlbertConfig.from_json_file(path)


def test_presets():
    assert set(config_lib.PRESETS) == {
        "albert_base", "albert_large", "albert_xlarge", "albert_xxlarge",
        "albert_base_v1", "albert_large_v1", "albert_xlarge_v1", "albert_xxlarge_v1",
        "bert_base", "bert_large", "bert_xlarge", "albert_tiny",
    }
    for size in ("base", "large", "xlarge", "xxlarge"):
        v2 = AlbertConfig.from_preset(f"albert_{size}")
        v1 = AlbertConfig.from_preset(f"albert_{size}_v1")
        assert v2.hidden_dropout_prob == v2.attention_probs_dropout_prob == 0.0
        assert v1.hidden_dropout_prob == (0.0 if size == "xxlarge" else 0.1)
        assert v2.sharing == "all" and v2.embedding_size == 128
    for size in ("base", "large", "xlarge"):
        bert = AlbertConfig.from_preset(f"bert_{size}")
        assert bert.sharing == "none" and bert.embedding_size == bert.hidden_size
    with pytest.raises(ValueError, match="unknown preset"):
        AlbertConfig.from_preset("albert_huge")


def test_configs_dir_holds_every_preset():
    for name in config_lib.PRESETS:
        path = os.path.join(CONFIGS_DIR, f"{name}.json")
        assert AlbertConfig.from_json_file(path) == AlbertConfig.from_preset(name), path


def test_routing_follows_release():
    # L=12, G=3: layers 0-3 group 0, 4-7 group 1, 8-11 group 2; k inner blocks in order.
    config = AlbertConfig(num_hidden_layers=12, num_hidden_groups=3, inner_group_num=2)
    table = config.routing()
    assert len(table) == 12
    for i, steps in enumerate(table):
        assert steps == [(("group", i // 4, k), ("group", i // 4, k)) for k in range(2)]
    # L=8, G=4 as int(i / L * G)
    uneven = AlbertConfig(num_hidden_layers=8, num_hidden_groups=4)
    assert [s[0][0][1] for s in uneven.routing()] == [0, 0, 1, 1, 2, 2, 3, 3]
    attention = config.replace(sharing="attention").routing()
    assert attention[5][1] == (("group", 1, 1), ("layer", 5, 1))
