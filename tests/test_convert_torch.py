"""pytorch_model.bin without torch: the restricted reader against files real torch wrote.

The fixtures in tests/data/convert/ were written by torch 2.13.0
(tests/data/convert/make_torch_fixtures.py); each .npz holds the arrays torch itself
gave for the same tensors.
"""

import io
import os
import pickle
import shutil
import zipfile

import numpy as np
import pytest

from albert_tf import AlbertPretrainer
from albert_tf.convert.api import load_source
from albert_tf.convert.torch_checkpoint import read_state_dict

from convert_helpers import convert_cli

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DATA = os.path.join(ROOT, "tests", "data", "convert")


@pytest.mark.parametrize("name", ["dtypes.bin", "hf_tiny_bin/pytorch_model.bin"])
def test_reader_gives_the_arrays_torch_gave(name):
    expected = np.load(os.path.join(DATA, name.split("/")[0].replace(".bin", "") + ".npz"))
    got = read_state_dict(os.path.join(DATA, name))
    assert list(got) == list(expected.files)
    for key in expected.files:
        assert got[key].dtype == expected[key].dtype and got[key].shape == expected[key].shape, key
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)


def test_dtypes_views_and_shared_storages():
    got = read_state_dict(os.path.join(DATA, "dtypes.bin"))
    base = np.arange(12, dtype="float32").reshape(3, 4) / 8 - 0.5
    np.testing.assert_array_equal(got["float32"], base)
    np.testing.assert_array_equal(got["bfloat16"], base)  # exact in bfloat16, returned as float32
    assert got["bfloat16"].dtype == np.float32 and got["float16"].dtype == np.float16
    assert got["int64"].tolist() == [i * 2 ** 40 for i in range(-3, 3)]
    assert got["int8"].tolist() == [-120, -80, -40, 0, 40, 80] and got["uint8"].tolist() == [0, 40, 80, 120, 160, 200]
    assert got["bool"].tolist() == [True, False, True]
    assert got["scalar"].shape == () and float(got["scalar"]) == 3.25
    assert got["empty"].shape == (0, 5)
    assert got["offset_view"].tolist() == [3.0, 4.0, 5.0, 6.0]  # storage offset 3 of a shared storage
    assert got["shared_whole"].tolist() == list(range(10))
    np.testing.assert_array_equal(got["transposed_view"], base.T)


def test_hf_directory_with_only_pytorch_model_bin_converts(tmp_path):
    source = tmp_path / "hf"
    shutil.copytree(os.path.join(DATA, "hf_tiny_bin"), source)
    assert sorted(os.listdir(source)) == ["config.json", "pytorch_model.bin"]
    result = convert_cli("--from=hf", f"--input={source}", f"--output={tmp_path / 'converted'}")
    assert result.returncode == 0, result.stderr[-3000:]
    model = AlbertPretrainer.from_pretrained(tmp_path / "converted")
    weights = {v.path: np.asarray(v) for v in model.weights}
    hf = np.load(os.path.join(DATA, "hf_tiny_bin.npz"))
    layer = "albert.encoder.albert_layer_groups.0.albert_layers.0."
    np.testing.assert_array_equal(weights["embeddings/word_embeddings"], hf["albert.embeddings.word_embeddings.weight"])
    np.testing.assert_array_equal(weights["pooler/kernel"], hf["albert.pooler.weight"].T)  # stored strided
    np.testing.assert_array_equal(weights["group_0_inner_group_0_ffn/intermediate/kernel"], hf[layer + "ffn.weight"].T)
    np.testing.assert_array_equal(weights["group_0_inner_group_0_attention/query/bias"],
                                  hf[layer + "attention.query.bias"])
    np.testing.assert_array_equal(weights["seq_relationship/output_weights"], hf["sop_classifier.classifier.weight"])
    np.testing.assert_array_equal(weights["predictions/output_bias"], hf["predictions.bias"])
    assert model.config.hidden_size == 8 and model.config.num_hidden_layers == 2

    # the same weights as model.safetensors give the same model
    from safetensors.numpy import save_file

    other = tmp_path / "hf_safetensors"
    other.mkdir()
    shutil.copy(source / "config.json", other / "config.json")
    save_file({k: np.ascontiguousarray(hf[k]) for k in hf.files}, str(other / "model.safetensors"))
    again = load_source("hf", str(other))
    for a, b in zip(model.weights, again.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)


class _Marker:
    """Pickles as a call of os.mkdir: what a hostile file would do."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (self.path,))


def _zip_with_pickle(path, payload):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", payload)
        z.writestr("archive/byteorder", "little")


def test_anything_but_tensors_is_refused_without_running_it(tmp_path):
    marker = str(tmp_path / "created_by_the_pickle")
    _zip_with_pickle(tmp_path / "evil.bin", pickle.dumps({"w": _Marker(marker)}, protocol=2))
    with pytest.raises(ValueError, match=r"evil.bin: cannot be read as a state dict of tensors: refusing "
                                         r"(posix|os)\.mkdir"):
        read_state_dict(str(tmp_path / "evil.bin"))
    assert not os.path.exists(marker)

    _zip_with_pickle(tmp_path / "not_a_dict.bin", pickle.dumps([1, 2], protocol=2))
    with pytest.raises(ValueError, match="holds a list, not a state dict"):
        read_state_dict(str(tmp_path / "not_a_dict.bin"))

    (tmp_path / "legacy.bin").write_bytes(b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.")  # pre-1.6 magic
    with pytest.raises(ValueError, match="not a torch zip archive.*model.safetensors"):
        read_state_dict(str(tmp_path / "legacy.bin"))

    # a storage shorter than its tensor: refused, not read past
    original = os.path.join(DATA, "dtypes.bin")
    with zipfile.ZipFile(original) as z, zipfile.ZipFile(tmp_path / "short.bin", "w") as out:
        for item in z.infolist():
            data = z.read(item.filename)
            out.writestr(item, data[:4] if item.filename.endswith("/data/0") else data)
    with pytest.raises(ValueError, match=r"short.bin: cannot be read .*storage dtypes/data/0 holds 4 bytes"):
        read_state_dict(str(tmp_path / "short.bin"))

    with zipfile.ZipFile(original) as z:
        big = io.BytesIO()
        with zipfile.ZipFile(big, "w") as out:
            for item in z.infolist():
                data = z.read(item.filename)
                out.writestr(item, b"big" if item.filename.endswith("byteorder") else data)
    (tmp_path / "big.bin").write_bytes(big.getvalue())
    with pytest.raises(ValueError, match="byte order 'big'"):
        read_state_dict(str(tmp_path / "big.bin"))
