"""Loading a Keras `.weights.h5` file with the one matching report: what the model would
write and what the file holds are compared by name and shape (`MatchReport`) and the file is
loaded only when they agree (`model.load_weights` alone names objects, not variables, and
skips a container it cannot find with only a warning).

    load_weights_file(model, "pretrained/pretrainer.weights.h5", "--init_checkpoint")

Keras and h5py only (no TensorFlow), so modeling code may use it.
"""

import os
import tempfile

import h5py

from albert_tf.storage import integrity
from albert_tf.storage.report import MatchReport

FIX = "Restore the file from a copy, or write it again."


def weights_file_variables(path):
    """{dataset path: shape} of a Keras `.weights.h5` file, e.g.
    "layers/albert_encoder/layers/embeddings/vars/0": (30000, 128)."""
    out = {}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            out[name] = tuple(obj.shape)

    with integrity.opened_weights_file(path, FIX) as f:
        f.visititems(visit)
    return out


def model_weights_variables(model):
    """{dataset path: shape} that `model.save_weights` writes for `model`."""
    with tempfile.TemporaryDirectory() as tmp:
        probe = os.path.join(tmp, "probe.weights.h5")
        model.save_weights(probe)
        return weights_file_variables(probe)


def load_weights_file(model, path, source):
    """Loads the `.weights.h5` file `path` into the built Keras `model` when every variable
    matches by name and shape, else raises CheckpointMismatchError (a ValueError) with the
    report, naming the file as `source` (a flag, a directory) does; DamagedFileError (a
    ValueError) for a file cut short or whose weights differ from the sha256 albert_tf
    recorded in it (storage.integrity). Returns `path`."""
    integrity.check_weights_file(path, FIX)
    MatchReport.compare(model_weights_variables(model), weights_file_variables(path),
                        f"{source} ({path})").raise_if_mismatched()
    model.load_weights(path)
    return path
