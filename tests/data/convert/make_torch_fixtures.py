"""Writes the torch fixtures of tests/test_convert_torch.py with real torch (run by hand).

    python3.11 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch==2.13.0 numpy
    /tmp/torchvenv/bin/python tests/data/convert/make_torch_fixtures.py

Writes, beside this script:
- hf_tiny_bin/config.json, hf_tiny_bin/pytorch_model.bin: a tiny AlbertForPreTraining
  state dict with Hugging Face's names as torch.save writes it (tied decoder sharing the
  word embeddings' and predictions.bias' storages, the position_ids buffer, _metadata, one
  strided view), and hf_tiny_bin.npz: the same arrays (what a torch-free reader must give);
- dtypes.bin / dtypes.npz: one tensor per storage dtype, a 0-d and an empty tensor, an
  offset view and a transposed view (bfloat16 as float32 in the .npz).
"""

import collections
import json
import os

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = {
    "vocab_size": 20, "embedding_size": 4, "hidden_size": 8, "num_hidden_layers": 2, "num_hidden_groups": 1,
    "inner_group_num": 1, "num_attention_heads": 2, "intermediate_size": 16, "hidden_act": "gelu_new",
    "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "max_position_embeddings": 16,
    "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12, "model_type": "albert",
    "architectures": ["AlbertForPreTraining"],
}


def hf_state():
    """name -> float32 array with torch layouts ([out, in] Linear weights)."""
    rng = np.random.default_rng(2024)
    V, E, H, I, P = 20, 4, 8, 16, 16
    L = "albert.encoder.albert_layer_groups.0.albert_layers.0."
    shapes = {
        "albert.embeddings.word_embeddings.weight": (V, E),
        "albert.embeddings.position_embeddings.weight": (P, E),
        "albert.embeddings.token_type_embeddings.weight": (2, E),
        "albert.embeddings.LayerNorm.weight": (E,), "albert.embeddings.LayerNorm.bias": (E,),
        "albert.encoder.embedding_hidden_mapping_in.weight": (H, E),
        "albert.encoder.embedding_hidden_mapping_in.bias": (H,),
        L + "full_layer_layer_norm.weight": (H,), L + "full_layer_layer_norm.bias": (H,),
        **{L + f"attention.{n}.weight": (H, H) for n in ("query", "key", "value", "dense")},
        **{L + f"attention.{n}.bias": (H,) for n in ("query", "key", "value", "dense")},
        L + "attention.LayerNorm.weight": (H,), L + "attention.LayerNorm.bias": (H,),
        L + "ffn.weight": (I, H), L + "ffn.bias": (I,), L + "ffn_output.weight": (H, I), L + "ffn_output.bias": (H,),
        "albert.pooler.weight": (H, H), "albert.pooler.bias": (H,),
        "predictions.bias": (V,), "predictions.LayerNorm.weight": (E,), "predictions.LayerNorm.bias": (E,),
        "predictions.dense.weight": (E, H), "predictions.dense.bias": (E,),
        "sop_classifier.classifier.weight": (2, H), "sop_classifier.classifier.bias": (2,),
    }
    out = {}
    for name, shape in shapes.items():
        value = rng.normal(scale=0.1, size=shape).astype("float32")
        out[name] = value + (1.0 if "LayerNorm.weight" in name or "layer_norm.weight" in name else 0.0)
    return out


def write_hf():
    arrays = hf_state()
    tensors = collections.OrderedDict((k, torch.from_numpy(v.copy())) for k, v in arrays.items())
    # a strided view: pooler.weight stored as the transpose of a contiguous [in, out] tensor
    tensors["albert.pooler.weight"] = torch.from_numpy(arrays["albert.pooler.weight"].T.copy()).T
    assert not tensors["albert.pooler.weight"].is_contiguous()
    tensors["albert.embeddings.position_ids"] = torch.arange(16).expand((1, -1))
    # tied as in AlbertForPreTraining: the decoder shares the embeddings' and the bias' storage
    tensors["predictions.decoder.weight"] = tensors["albert.embeddings.word_embeddings.weight"]
    tensors["predictions.decoder.bias"] = tensors["predictions.bias"]
    tensors._metadata = collections.OrderedDict({"": {"version": 1}})
    directory = os.path.join(HERE, "hf_tiny_bin")
    os.makedirs(directory, exist_ok=True)
    torch.save(tensors, os.path.join(directory, "pytorch_model.bin"))
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2, sort_keys=True)
        f.write("\n")
    np.savez(os.path.join(HERE, "hf_tiny_bin.npz"), **{k: v.numpy() for k, v in tensors.items()})


def write_dtypes():
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4) / 8 - 0.5
    tensors = collections.OrderedDict([
        ("float32", base.clone()),
        ("float64", base.double() / 3),
        ("float16", base.half()),
        ("bfloat16", base.bfloat16()),
        ("int64", torch.arange(-3, 3, dtype=torch.int64) * (2 ** 40)),
        ("int32", torch.arange(-3, 3, dtype=torch.int32) * 70000),
        ("int16", torch.arange(-3, 3, dtype=torch.int16) * 1000),
        ("int8", torch.arange(-3, 3, dtype=torch.int8) * 40),
        ("uint8", torch.arange(0, 6, dtype=torch.uint8) * 40),
        ("bool", torch.tensor([True, False, True])),
        ("scalar", torch.tensor(3.25)),
        ("empty", torch.zeros(0, 5)),
    ])
    shared = torch.arange(10, dtype=torch.float32)
    tensors["offset_view"] = shared[3:7]
    tensors["transposed_view"] = base.T
    tensors["shared_whole"] = shared
    path = os.path.join(HERE, "dtypes.bin")
    torch.save(tensors, path)
    np.savez(os.path.join(HERE, "dtypes.npz"),
             **{k: (v.float() if v.dtype == torch.bfloat16 else v).numpy() for k, v in tensors.items()})


if __name__ == "__main__":
    write_hf()
    write_dtypes()
    print("torch", torch.__version__, "wrote", sorted(os.listdir(HERE)))
