#!/usr/bin/env bash
# An honest install (README "Set-up"), as a user adds albert_tf to an environment of their own: a wheel
# built from this tree goes into a fresh venv that already holds setuptools and numpy other than
# requirements.txt's (newer setuptools, older numpy, both within pyproject.toml's ranges), with the [hub]
# extra. pip must downgrade neither and `pip check` must be clean. Then, from that venv alone (run outside
# the checkout, so the installed package is the one imported), the console scripts make tiny pretraining
# data, pretrain a tiny model 2 steps, export it, and fine-tune 2 steps from the export, and the export
# loads through hub.KerasLayer. Needs the package registry (not in the suite); .ci/run calls it.
#
#   .ci/install_check.sh [PYTHON]      (default python3.11)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${1:-python3.11}
HELD=(setuptools==80.9.0 numpy==2.3.5)  # what the user's environment holds before albert_tf
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
say() { echo "install_check: $* ($SECONDS s)"; }

"$PYTHON" -m venv venv
PY=$WORK/venv/bin/python
"$PY" -m pip install --quiet "${HELD[@]}"
"$PY" -m pip freeze --all | sort > before.txt
mkdir src  # the tree's files (tracked, and new ones git does not ignore), so that the build leaves nothing in it
git -C "$ROOT" ls-files -z --cached --others --exclude-standard \
    | tar -C "$ROOT" --null -T - --ignore-failed-read -cf - | tar -xf - -C src
"$PY" -m pip wheel --quiet --no-deps --wheel-dir wheels ./src
WHEEL=$(ls wheels/albert_tf-*.whl)
say "installing $(basename "$WHEEL")[hub] beside ${HELD[*]}"
"$PY" -m pip install --quiet "$WHEEL[hub]"
"$PY" -m pip freeze --all | sort > after.txt
for held in "${HELD[@]}"; do
    grep -qx "$held" after.txt || {
        say "FAILED: pip replaced $held: $(grep -i "^${held%%==*}==" after.txt)" >&2
        exit 1
    }
done
"$PY" -m pip check
say "kept ${HELD[*]}; pip check clean; $(wc -l < after.txt) packages"

# tiny data: the packaged sample corpus, a 1000-piece SentencePiece model, a one-layer albert_tiny, CoLA-style TSVs
"$PY" - <<'EOF'
import os

from albert_tf import AlbertConfig
from albert_tf.data.sample_corpus import write_corpus
from albert_tf.data.spm_training import SentencePieceOptions, train_sentencepiece

write_corpus("corpus.txt", 0.3)
train_sentencepiece(["corpus.txt"], "spm", SentencePieceOptions(vocab_size=1000))
AlbertConfig.from_preset("albert_tiny").replace(vocab_size=1000, num_hidden_layers=1,
                                                num_hidden_groups=1).to_json_file("albert_config.json")
lines = [line for line in open("corpus.txt", encoding="utf-8").read().splitlines() if len(line.split()) > 4][:32]
os.makedirs("cola")
for split in ("train", "dev"):
    with open(f"cola/{split}.tsv", "w", encoding="utf-8") as f:
        f.writelines(f"src\t{int('return' in line.lower())}\t\t{line}\n" for line in lines)
EOF
BIN=$WORK/venv/bin
say "tiny data made; the console scripts"
"$BIN/albert-create-pretraining-data" --input_file=corpus.txt --output_file=train.tfrecord --spm_model_file=spm.model \
    --max_seq_length=64 --max_predictions_per_seq=10 --dupe_factor=1
"$BIN/albert-run-pretraining" --input_file=train.tfrecord --output_dir=pretrain \
    --albert_config_file=albert_config.json --max_seq_length=64 --max_predictions_per_seq=10 --train_batch_size=8 \
    --num_train_steps=2 --num_warmup_steps=1 --max_eval_steps=2
"$BIN/albert-export-tfhub" --albert_config_file=albert_config.json --checkpoint=pretrain --spm_model_file=spm.model \
    --export_path=hub
"$BIN/albert-run-classifier" --task_name=CoLA --data_dir=cola --output_dir=classifier --albert_hub_module_handle=hub \
    --do_train --max_seq_length=32 --train_batch_size=8 --train_step=2 --warmup_step=1
say "pretrained 2 steps, exported, fine-tuned 2 steps from the export"
"$PY" - <<'EOF'
import tensorflow as tf
import tensorflow_hub as hub
import tensorflow_text  # noqa: F401  (registers the ops preprocess/ runs)

preprocess = hub.KerasLayer("hub/preprocess")
encoder = hub.KerasLayer("hub/encoder", trainable=True)
pooled = encoder(preprocess(tf.constant(["a sentence to encode", "and another one"])))["pooled_output"]
assert pooled.shape[0] == 2 and encoder.trainable_weights, pooled.shape
print(f"install_check: hub.KerasLayer loads the export: pooled_output {pooled.shape}")
EOF
say "passed"
