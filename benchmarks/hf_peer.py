"""The Hugging Face transformers peer of benchmarks/finetune_bench.py (PyTorch, CPU).

Runs in its own environment (benchmarks/make_peers_venv.sh makes benchmarks/.peers-venv
with torch, transformers and sentencepiece; none of them is a dependency of albert_tf),
never imported by albert_tf or its tests. finetune_bench.py starts it with that venv's
python and talks to it in JSON lines, so its measurements interleave with the others':

    python hf_peer.py --data_json=DATA --spm_model=spm.model --config_json=CONFIG [...]
    stdin:  {"cmd": "info", "probe": [texts]} | {"cmd": "logits", "texts": [...]}
            | {"cmd": "train", "steps": N[, "batches": [[train indices], ...]]} | {"cmd": "eval"}
            | {"cmd": "latency", "calls": N, "text": "..."} | {"cmd": "throughput", "batches": N}
            | {"cmd": "quit"}
    stdout: one JSON object per command ({"error": "..."} when it failed)

    python hf_peer.py ... --once          # a check by hand: info, 1 + --steps training steps,
                                          # eval, latency, throughput; prints one JSON object

What it runs, as a transformers user would: AlbertForSequenceClassification (initial
weights from --init_npz, else torch.manual_seed(--seed)'s; dims from --config_json, an albert_tf
AlbertConfig: "gelu" there is HF's "gelu_new", both the tanh approximation) on the
AlbertTokenizer converted from the same SentencePiece model (from_pretrained of a folder
holding it as spiece.model; lower-cases and strips accents as albert_tf does). Training:
the HF Trainer's loop by hand: random order per epoch (seeded), each batch tokenized with
padding="longest" (truncation at --max_seq_length), cross-entropy, clip_grad_norm_ 1.0,
torch.optim.AdamW (weight decay 0.01 except biases and LayerNorm weights, eps 1e-6, as
albert_tf's AdamW) with a linear decay to 0 over --total_steps. Evaluation and requests:
model.eval() under torch.inference_mode(), dev batches in order, padded to their longest.
With --optimizer=release_adamw: the release's AdamW instead (albert_tf's AdamWeightDecay: no bias
correction, decay added to the update, excluded where the name holds LayerNorm, layer_norm or
bias); a train command with "batches" trains on those batches of training indices, in order.

--data_json: {"labels": [...], "train": {"text": [...], "label": [...]}, "dev": {...}}
(label ids), written by finetune_bench.py so both sides see the same examples; a split with
"ids" (piece ids per example, no [CLS]/[SEP]) trains and evaluates on those instead of this
tokenizer's pieces (the accuracy run: transformers' AlbertTokenizer splits some text, e.g.
"tuple (low", differently from the SentencePiece model itself).
--init_npz: initial weights (AlbertForSequenceClassification state-dict names), written by
finetune_bench.py from albert_tf's initial classifier, so every system starts equal;
without it the weights are torch's random initialization.
"""

import argparse
import importlib
import json
import os
import statistics
import sys
import tempfile
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data_json", required=True)
    p.add_argument("--spm_model", required=True)
    p.add_argument("--config_json", required=True, help="albert_tf AlbertConfig JSON (dims, dropout, vocab).")
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--learning_rate", type=float, default=5e-5)
    p.add_argument("--total_steps", type=int, default=1000, help="Length of the linear decay.")
    p.add_argument("--classifier_dropout", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--optimizer", choices=["adamw", "release_adamw"], default="adamw",
                   help="torch.optim.AdamW (its users' default) or the release's AdamW (as albert_tf's).")
    p.add_argument("--init_npz", default=None, help="Initial weights: state-dict name -> array (all parameters).")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default).")
    p.add_argument("--once", action="store_true", help="Run every measurement once and print one JSON object.")
    p.add_argument("--steps", type=int, default=2, help="--once: timed training steps.")
    p.add_argument("--calls", type=int, default=5, help="--once: latency calls.")
    return p.parse_args(argv)


def release_adamw(torch):
    """The release's AdamW as a torch optimizer class (albert_tf.training.optimizer's formula):
    m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2 (no bias correction);
    w <- w - lr (m / (sqrt(v) + eps) + wd w)."""

    class ReleaseAdamW(torch.optim.Optimizer):
        def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0):
            super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

        @torch.no_grad()
        def step(self):
            for group in self.param_groups:
                b1, b2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["m"], state["v"] = torch.zeros_like(p), torch.zeros_like(p)
                    m, v = state["m"], state["v"]
                    m.mul_(b1).add_(p.grad, alpha=1 - b1)
                    v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                    update = m / (v.sqrt() + group["eps"])
                    if group["weight_decay"]:
                        update.add_(p, alpha=group["weight_decay"])
                    p.add_(update, alpha=-group["lr"])

    return ReleaseAdamW


class Peer:
    def __init__(self, args):
        # Imported by name: torch and transformers live only in the peers venv, never in
        # albert_tf's requirements (tools/update_build.py takes BUILD deps from static imports).
        torch = importlib.import_module("torch")
        transformers = importlib.import_module("transformers")
        AlbertConfig = transformers.AlbertConfig
        AlbertForSequenceClassification = transformers.AlbertForSequenceClassification
        AlbertTokenizer = transformers.AlbertTokenizer

        self.torch = torch
        self.args = args
        if args.threads:
            torch.set_num_threads(args.threads)
        with open(args.data_json, encoding="utf-8") as f:
            data = json.load(f)
        self.labels = data["labels"]
        self.train_text, self.train_label = data["train"]["text"], data["train"]["label"]
        self.dev_text, self.dev_label = data["dev"]["text"], data["dev"]["label"]
        # optional piece ids (without [CLS]/[SEP]) given by finetune_bench: the split's inputs, not its tokenizer's
        self.ids = {split: data[split]["ids"] for split in ("train", "dev") if "ids" in data[split]}
        with open(args.config_json, encoding="utf-8") as f:
            c = json.load(f)

        with tempfile.TemporaryDirectory() as folder:  # from_pretrained converts spiece.model
            with open(args.spm_model, "rb") as src, open(os.path.join(folder, "spiece.model"), "wb") as dst:
                dst.write(src.read())
            self.tokenizer = AlbertTokenizer.from_pretrained(folder, do_lower_case=True, keep_accents=False)
        act = {"gelu": "gelu_new", "gelu_new": "gelu_new", "gelu_exact": "gelu"}.get(c["hidden_act"], c["hidden_act"])
        config = AlbertConfig(
            vocab_size=c["vocab_size"], embedding_size=c["embedding_size"], hidden_size=c["hidden_size"],
            num_hidden_layers=c["num_hidden_layers"], num_hidden_groups=c["num_hidden_groups"],
            num_attention_heads=c["num_attention_heads"], intermediate_size=c["intermediate_size"],
            inner_group_num=c["inner_group_num"], hidden_act=act, hidden_dropout_prob=c["hidden_dropout_prob"],
            attention_probs_dropout_prob=c["attention_probs_dropout_prob"],
            max_position_embeddings=c["max_position_embeddings"], type_vocab_size=c["type_vocab_size"],
            initializer_range=c["initializer_range"], classifier_dropout_prob=args.classifier_dropout,
            num_labels=len(self.labels), pad_token_id=self.tokenizer.pad_token_id)
        torch.manual_seed(args.seed)
        self.model = AlbertForSequenceClassification(config)
        self.initialized_from = "random (torch.manual_seed)"
        if args.init_npz:
            import numpy as np

            arrays = np.load(args.init_npz)
            state = {k: torch.from_numpy(arrays[k]) for k in arrays.files}
            missing, unexpected = self.model.load_state_dict(state, strict=False)
            params = {n for n, _ in self.model.named_parameters()}
            missing = [k for k in missing if k in params]
            if missing or unexpected:
                raise ValueError(f"--init_npz: missing parameters {missing}, unexpected {list(unexpected)}")
            self.initialized_from = args.init_npz
        excluded = ("bias", "LayerNorm") if args.optimizer == "adamw" else ("bias", "LayerNorm", "layer_norm")
        no_decay = [p for n, p in self.model.named_parameters() if any(x in n for x in excluded)]
        decay = [p for n, p in self.model.named_parameters() if not any(x in n for x in excluded)]
        groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
        if args.optimizer == "adamw":
            self.optimizer = torch.optim.AdamW(groups, lr=args.learning_rate, eps=1e-6)
        else:
            self.optimizer = release_adamw(torch)(groups, lr=args.learning_rate)
        total = max(args.total_steps, 1)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer,
                                                           lambda step: max(0.0, 1.0 - step / total))
        self.generator = torch.Generator().manual_seed(args.seed)
        self.order, self.position = [], 0
        self.versions = {"torch": torch.__version__, "transformers": transformers.__version__}

    def _encode(self, texts):
        return self.tokenizer(texts, padding="longest", truncation=True, max_length=self.args.max_seq_length,
                              return_tensors="pt")

    def _batch(self, split, indices):
        """The model's inputs for examples `indices` of `split`, padded to their longest: from the
        given piece ids where data_json has them, else tokenized from the text."""
        if split not in self.ids:
            texts = self.train_text if split == "train" else self.dev_text
            return self._encode([texts[i] for i in indices])
        tok, t, cap = self.tokenizer, self.torch, self.args.max_seq_length - 2
        rows = [[tok.cls_token_id] + self.ids[split][i][:cap] + [tok.sep_token_id] for i in indices]
        width = max(len(r) for r in rows)
        ids = t.tensor([r + [tok.pad_token_id] * (width - len(r)) for r in rows])
        mask = t.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": t.zeros_like(ids)}

    def _next_indices(self):
        b = self.args.batch_size
        if self.position + b > len(self.order):  # a new epoch (the partial batch is dropped)
            self.order = self.torch.randperm(len(self.train_text), generator=self.generator).tolist()
            self.position = 0
        out = self.order[self.position:self.position + b]
        self.position += b
        return out

    def info(self, probe=()):
        t = self.torch
        return {"versions": self.versions, "threads": t.get_num_threads(),
                "tokenizer": f"{type(self.tokenizer).__module__}.{type(self.tokenizer).__name__}",
                "attn_implementation": getattr(self.model.config, "_attn_implementation", None),
                "parameters": sum(p.numel() for p in self.model.parameters()),
                "initialized_from": self.initialized_from,
                "probe_ids": [self.tokenizer(s, truncation=True, max_length=self.args.max_seq_length)["input_ids"]
                              for s in probe]}

    def logits(self, texts):
        self.model.eval()
        with self.torch.inference_mode():
            return {"logits": self.model(**self._encode(list(texts))).logits.tolist()}

    def train(self, steps, batches=None):
        t = self.torch
        self.model.train()
        loss_sum, correct, count = 0.0, 0, 0
        start = time.perf_counter()
        for step in range(steps):
            idx = self._next_indices() if batches is None else batches[step]
            batch = self._batch("train", idx)
            labels = t.tensor([self.train_label[i] for i in idx])
            out = self.model(**batch, labels=labels)
            out.loss.backward()
            t.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)
            loss_sum += float(out.loss.detach()) * len(idx)
            correct += int((out.logits.argmax(-1) == labels).sum())
            count += len(idx)
        return {"seconds": time.perf_counter() - start, "examples": count, "loss": loss_sum / max(count, 1),
                "accuracy": correct / max(count, 1)}

    def evaluate(self):
        t = self.torch
        self.model.eval()
        b, correct = self.args.batch_size, 0
        start = time.perf_counter()
        with t.inference_mode():
            for i in range(0, len(self.dev_text), b):
                logits = self.model(**self._batch("dev", range(i, min(i + b, len(self.dev_text))))).logits
                correct += sum(int(p == y) for p, y in zip(logits.argmax(-1).tolist(), self.dev_label[i:i + b]))
        seconds = time.perf_counter() - start
        return {"seconds": seconds, "examples": len(self.dev_text), "accuracy": correct / max(len(self.dev_text), 1)}

    def latency(self, calls, text):
        t = self.torch
        self.model.eval()
        times = []
        with t.inference_mode():
            for _ in range(calls):
                start = time.perf_counter()
                self.model(**self._encode([text])).logits.argmax(-1).tolist()
                times.append(time.perf_counter() - start)
        return {"ms": [s * 1e3 for s in times]}

    def throughput(self, batches):
        t = self.torch
        self.model.eval()
        b, n = self.args.batch_size, len(self.dev_text)
        count = 0
        start = time.perf_counter()
        with t.inference_mode():
            for k in range(batches):
                i = (k * b) % max(n - b + 1, 1)
                texts = self.dev_text[i:i + b]
                self.model(**self._encode(texts)).logits.argmax(-1).tolist()
                count += len(texts)
        return {"seconds": time.perf_counter() - start, "examples": count}

    def handle(self, request):
        cmd = request.get("cmd")
        if cmd == "info":
            return self.info(request.get("probe", []))
        if cmd == "logits":
            return self.logits(request["texts"])
        if cmd == "train":
            batches = request.get("batches")
            if batches is not None and len(batches) < int(request["steps"]):
                raise ValueError(f"train: {len(batches)} batches for {request['steps']} steps")
            return self.train(int(request["steps"]), batches)
        if cmd == "eval":
            return self.evaluate()
        if cmd == "latency":
            return self.latency(int(request["calls"]), request["text"])
        if cmd == "throughput":
            return self.throughput(int(request["batches"]))
        raise ValueError(f"unknown command {cmd!r}")


def main(argv=None):
    args = parse_args(argv)
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w")  # replies only; library output goes to stderr
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    peer = Peer(args)
    if args.once:
        result = {"info": peer.info(peer.dev_text[:2]), "warmup": peer.train(1), "train": peer.train(args.steps),
                  "eval": peer.evaluate()}
        peer.latency(2, peer.dev_text[0])
        ms = peer.latency(args.calls, peer.dev_text[0])["ms"]
        result["latency_p50_ms"] = statistics.median(ms)
        result["throughput"] = peer.throughput(2)
        out.write(json.dumps(result) + "\n")
        out.flush()
        return 0
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if request.get("cmd") == "quit":
            break
        try:
            reply = peer.handle(request)
        except Exception as e:  # the driver reports it and skips this peer
            reply = {"error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
