"""Shared pytest setup: quiet TensorFlow, deterministic seeds, tiny configs."""

import gc
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# A cheaper XLA CPU compile for the tests' jit-compiled steps and exports (tiny models:
# compiling is nearly all of their first call), at LLVM's usual optimisation level (level 0
# made the inference benchmark's XLA profile mostly non-matmul time); the results are checked
# against the graph path within the same bounds. Read when XLA starts: set before TensorFlow loads.
os.environ.setdefault("XLA_FLAGS", "--xla_llvm_disable_expensive_passes=true --xla_cpu_use_fusion_emitters=false "
                      "--xla_cpu_parallel_codegen_split_count=1")

# Python's cyclic garbage collector scans every tracked object, and a test worker that traces
# hundreds of TensorFlow graphs holds millions: at the default thresholds (700, 10, 10)
# collection took 11% of tests/test_run_classifier.py's time (11.0 s of 106 s in 7,188
# collections); at these, 2.9 s in 33 (92 s in all). Objects that live through collection
# (modules, TensorFlow's own) are frozen out of the scans after it (pytest_collection_finish).
gc.set_threshold(50_000, 20, 100)

import numpy as np  # noqa: E402
import pytest  # noqa: E402

@pytest.fixture(autouse=True)
def _seed():
    import keras

    keras.utils.set_random_seed(1234)
    yield


# Learning checks (tests marked `learning`: a test that asserts a model learned): the
# `learning` fixture forces a seed and a dtype policy from the environment, and records what
# each check measured (docs/testing.md "Learning checks"; benchmarks/learning_checks.py).
LEARNING_SEED, LEARNING_POLICY, LEARNING_LOG = ("ALBERT_TF_LEARNING_SEED", "ALBERT_TF_LEARNING_POLICY",
                                                "ALBERT_TF_LEARNING_LOG")
LEARNING_POLICIES = ("float32", "mixed_bfloat16")


def learning_settings():
    """(seed or None, policy or None) from ALBERT_TF_LEARNING_SEED and ALBERT_TF_LEARNING_POLICY;
    pytest.UsageError for a value that is not an integer, or not float32 or mixed_bfloat16."""
    seed, policy = os.environ.get(LEARNING_SEED, "").strip(), os.environ.get(LEARNING_POLICY, "").strip()
    try:
        seed = int(seed) if seed else None
    except ValueError:
        raise pytest.UsageError(f"{LEARNING_SEED}={seed!r} is not an integer.") from None
    if policy and policy not in LEARNING_POLICIES:
        raise pytest.UsageError(f"{LEARNING_POLICY}={policy!r} is not one of {', '.join(LEARNING_POLICIES)}.")
    return seed, policy or None


class Learning:
    """What the `learning` fixture gives a learning check. With neither environment variable
    set, every method returns the test's own default (seed_or, policy_or) or nothing to add
    (flags, hub_export): the test computes exactly what it computes without the fixture.

    Attributes:
        seed: ALBERT_TF_LEARNING_SEED (an int) or None.
        policy: ALBERT_TF_LEARNING_POLICY or None; always None in a test marked
            `learning(both_policies=True)` (it compares mixed_bfloat16 with float32 itself).
    """

    def __init__(self, test, seed, policy, log):
        self.test, self.seed, self.policy, self.log = test, seed, policy, log

    def seed_or(self, default):
        """The forced seed, else the test's `default`."""
        return default if self.seed is None else self.seed

    def policy_or(self, default):
        """The forced dtype policy, else the test's `default`."""
        return default if self.policy is None else self.policy

    def flags(self, seed="--random_seed", policy="--dtype_policy"):
        """The command-line flags to add: `seed`=SEED and `policy`=POLICY for what is forced
        (None: never that flag); [] when nothing is."""
        added = []
        if seed and self.seed is not None:
            added.append(f"{seed}={self.seed}")
        if policy and self.policy is not None:
            added.append(f"{policy}={self.policy}")
        return added

    def hub_export(self, default_path, pretrainer, spm_model, directory, seq_length):
        """The TF-Hub-style export a check fine-tunes: `default_path` (a float32 export of
        `pretrainer`) unless the policy forced is mixed_bfloat16; then `pretrainer` exported
        computing in it (export_tfhub's dtype_policy) into `directory`, made here."""
        if self.policy in (None, "float32"):
            return default_path
        from albert_tf.export.exporter import export_tfhub

        return str(export_tfhub(pretrainer, spm_model, str(directory), seq_length=seq_length, dtype_policy=self.policy))

    def record(self, name, value, threshold, better, strict=False, policy=None):
        """What the check measured, right before its assertion: appends one JSON line {test,
        name, value, threshold, better, strict, seed, policy} to ALBERT_TF_LEARNING_LOG when it
        is set (nothing otherwise). `better`: "higher" (the assertion is value >= threshold,
        > with `strict`) or "lower" (<=, <); `policy`: the one the value was measured at
        (default: the policy forced, None when none is: the test's own); "both" for a
        difference between mixed_bfloat16 and float32. Returns `value`."""
        if better not in ("higher", "lower"):
            raise ValueError(f"better={better!r} is not 'higher' or 'lower'")
        if self.log:
            import json

            line = json.dumps({"test": self.test, "name": name, "value": float(value), "threshold": float(threshold),
                               "better": better, "strict": bool(strict), "seed": self.seed,
                               "policy": policy if policy is not None else self.policy}) + "\n"
            fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode("utf-8"))  # one write of one line: whole, with several workers
            finally:
                os.close(fd)
        return value


@pytest.fixture
def learning(request):
    """A learning check's forced seed and policy and its `record` (class Learning). With
    ALBERT_TF_LEARNING_SEED set, Keras' global seeds (Python, NumPy, TensorFlow) are set to it
    here, after the suite's own (_seed)."""
    marker = request.node.get_closest_marker("learning")
    assert marker is not None, f"{request.node.nodeid} uses the learning fixture without the learning marker"
    seed, policy = learning_settings()
    if marker.kwargs.get("both_policies"):
        policy = None
    if seed is not None:
        import keras

        keras.utils.set_random_seed(seed)
    return Learning(request.node.nodeid, seed, policy, os.environ.get(LEARNING_LOG) or None)


@pytest.fixture
def tiny_config():
    from albert_tf import AlbertConfig

    return AlbertConfig.from_preset("albert_tiny")


def random_inputs(config, batch=3, length=12, seed=0, pad_from=(None, 7, 3)):
    """Random encoder inputs; row r is padded from position pad_from[r] (None: no padding)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, config.vocab_size, (batch, length)).astype("int32")
    mask = np.ones((batch, length), "int32")
    types = np.zeros((batch, length), "int32")
    for r in range(batch):
        start = pad_from[r % len(pad_from)]
        if start is not None:
            mask[r, start:] = 0
            ids[r, start:] = 0
        types[r, length // 2 :] = 1
    types *= mask
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def write_tiny_config(directory, **overrides):
    """configs/albert_tiny.json with the 3000 pieces of the sample SentencePiece model and no
    dropout (and `overrides`), written as directory/albert_config.json; returns its path."""
    import json

    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    with open(os.path.join(root, "configs", "albert_tiny.json"), encoding="utf-8") as f:
        config = json.load(f)
    config.update(dict(vocab_size=3000, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), **overrides)
    path = os.path.join(str(directory), "albert_config.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    return path


def run_in_process(command, args):
    """`python -m albert_tf.NAME ARGS` (or `python tools/NAME.py ARGS`) in this process: `command`
    is the command's module (e.g. run_classifier, tools.make_squad_data) or its `main(argv)`, called
    with ARGS as strings while sys.stdout and sys.stderr are redirected (cli.main sends absl's lines
    there too; lines C++ writes to the file descriptors are not caught, as with capsys):
    SimpleNamespace(returncode, stdout, stderr) of what it printed."""
    import contextlib
    import io
    import types

    main = getattr(command, "main", command)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in args])
    return types.SimpleNamespace(returncode=status, stdout=out.getvalue(), stderr=err.getvalue())


class Capture:
    """A stream that keeps what is written to it (`text`), for a command's `stream=`."""

    def __init__(self):
        self.text = ""

    def write(self, text):
        self.text += text

    def flush(self):
        pass


def listing(directory):
    """What is in `directory` besides albert_tf's markers (storage.outputs)."""
    return sorted(n for n in os.listdir(directory) if not n.endswith(".albert_tf_output.json"))


def flip_a_bit(path):
    """Flips one bit in the middle of file `path` (TensorFlow's CRC check then refuses a TFRecord)."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))


def extract_archive(archive, root):
    """Extracts one of the suite's own archives (tests/data/*.tar.*: plain files and
    directories under relative names, checked) into directory `root`."""
    import tarfile

    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            assert not os.path.isabs(member.name) and ".." not in parts, member.name
            if member.isdir():
                os.makedirs(os.path.join(root, *parts), exist_ok=True)
            else:
                assert member.isfile(), member.name
                os.makedirs(os.path.join(root, *parts[:-1]), exist_ok=True)
                with open(os.path.join(root, *parts), "wb") as f:
                    f.write(tar.extractfile(member).read())


def shared_once(tmp_path_factory, name, build):
    """build(directory) run once per test session, shared by every pytest-xdist worker: the
    first worker to ask builds into a directory of the session's common temporary root under a
    file lock and records build's JSON-able result; the others wait and read that result.
    (Session fixtures of their own would be built once per worker: twice under `make test`.)"""
    import json

    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the session's root, common to the workers
    directory = base / "shared" / name
    directory.parent.mkdir(parents=True, exist_ok=True)
    result_file = directory.parent / f"{name}.json"
    with FileLock(str(directory.parent / f"{name}.lock")):
        if not result_file.exists():
            directory.mkdir()
            result_file.write_text(json.dumps(build(directory)), encoding="utf-8")
        return json.loads(result_file.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def entries(tool):
    """The docstring entries (albert_tf's own text) that the test module's `tool` fixture (a
    data-making tool, e.g. tools.make_squad_data) builds its data from."""
    return tool.docstring_entries()


@pytest.fixture(scope="session")
def sample_corpus(tmp_path_factory):
    """The built-in sample corpus (1.2 MB of docstring prose), made once per session."""

    def build(directory):
        from albert_tf.data.sample_corpus import write_corpus

        path = str(directory / "sample_corpus.txt")
        write_corpus(path, 1.2)
        return path

    return shared_once(tmp_path_factory, "corpus", build)


@pytest.fixture(scope="session")
def spm_model(sample_corpus, tmp_path_factory):
    """A 3000-piece SentencePiece model of the sample corpus (the release's recipe)."""

    def build(directory):
        from albert_tf.data.spm_training import SentencePieceOptions, train_sentencepiece

        return train_sentencepiece([sample_corpus], str(directory / "sample"), SentencePieceOptions(vocab_size=3000))

    return shared_once(tmp_path_factory, "spm", build)


@pytest.fixture(scope="session")
def pretraining_records(sample_corpus, spm_model, tmp_path_factory):
    """Static-masking TFRecords of the sample corpus at seq 128 (2 shards) and their summary."""

    def build(directory):
        from albert_tf.data.instances import InstanceOptions
        from albert_tf.data.writer import WriterOptions, write_pretraining_data

        outputs = [str(directory / "train-0.tfrecord"), str(directory / "train-1.tfrecord")]
        summary = write_pretraining_data([sample_corpus], outputs, spm_model,
                                         WriterOptions(InstanceOptions(max_seq_length=128), dupe_factor=2),
                                         progress_stream=None)
        return [outputs, summary]

    outputs, summary = shared_once(tmp_path_factory, "records", build)
    return outputs, summary


@pytest.fixture(scope="session")
def tiny_export(spm_model, tmp_path_factory):
    """A tiny random ALBERT (albert_tiny, vocab 3000) as an export (encoder/ + preprocess/,
    seq 32) and as an albert_tf pretrained directory, for the fine-tuning tests."""

    def build(directory):
        import keras

        from albert_tf import AlbertConfig, AlbertPretrainer
        from albert_tf.export.exporter import export_tfhub

        keras.utils.set_random_seed(1234)
        model = AlbertPretrainer(AlbertConfig.from_preset("albert_tiny").replace(vocab_size=3000))
        pretrained = model.save_pretrained(str(directory / "pretrained"))
        hub = export_tfhub(model, spm_model, str(directory / "hub"), seq_length=32)
        return {"hub": str(hub), "pretrained": str(pretrained), "spm": spm_model}

    return shared_once(tmp_path_factory, "tiny_export", build)


# Text in many scripts, each with what tells normalisations apart: accents and marks of
# non-zero combining class (dropped), marks of class 0 (kept: Devanagari, Thai, Tibetan,
# Myanmar and Khmer vowel signs, the emoji variation selector), spacing marks of non-zero
# class (dropped: Hangul tone marks, the Javanese pangkon), the final sigma, capitals newer
# than TensorFlow's lower-casing, full-width apostrophes that NFKD turns into ''.
MULTISCRIPT = {
    "latin": "Crème brûlée à la façade: naïve Zoë, Ångström, São Paulo, Straße, ÆØ, Łódź, Ṣạ́ḍ.",
    "devanagari": "हिन्दी में कुछ शब्द: संस्कृत, प्रेम, गुरु, क़िला, ज्ञान और चाँद।",
    "thai": "ภาษาไทยมีวรรณยุกต์ เช่น ที่ น้ำ ไม้ กิน สั้น และ เด็ก",
    "arabic": "اَلْعَرَبِيَّةُ لُغَةٌ جَمِيلَةٌ، وَالْكِتَابُ مُفِيدٌ.",
    "vietnamese": "Tiếng Việt có dấu: người, được, những, Hà Nội và Đà Nẵng.",
    "greek": "Η ελληνική γλώσσα: ΟΔΟΣ ΚΑΛΟΣ, άνθρωπος, Σίσυφος, ΐ ΰ, ΣΟΦΟΣ.",
    "cyrillic": "Йошкар-Ола, ёлка и ЁЖ: йогурт, район, объём, Ёлкин.",
    "cjk": "日本語の文章と中文句子，还有全角ＡＢＣ１２３と「かぎ括弧」。",
    "hangul": "한국어 문장입니다. 훈민정음\u302e 해례\u302f본.",
    "emoji": "Good 👍🏽 family 👨\u200d👩\u200d👧\u200d👦 love ❤\ufe0f key 1\ufe0f\u20e3 "
             "flag 🏳\ufe0f\u200d🌈 smile ☺\ufe0e.",
    "more marks": "བོད་ཡིག, မြန်မာ, ភាសាខ្មែរ, ދިވެހި, ꦗꦮ꧀.",
    "new capitals": "Vithkuqi 𐕰𐕱 and Glagolitic Ⱟ, ΜΕΓΑΛΟΣ.",
    "quotes": "Ｉｔ＇＇ｓ ``quoted'' and ‘single’ ＂full＂.",
}


@pytest.fixture(scope="session")
def multiscript_spm(tmp_path_factory):
    """A small SentencePiece model (the release's recipe, every character covered) of
    MULTISCRIPT, so that each script's characters are pieces of their own, not <unk>."""

    def build(directory):
        from albert_tf.data.spm_training import SentencePieceOptions, train_sentencepiece

        corpus = directory / "corpus.txt"
        words = " ".join(MULTISCRIPT.values()).split()
        lines = list(MULTISCRIPT.values()) + [" ".join(words[i::7]) for i in range(7)]
        corpus.write_text("\n".join(lines * 4) + "\n", encoding="utf-8")
        return train_sentencepiece([str(corpus)], str(directory / "multiscript"),
                                   SentencePieceOptions(vocab_size=256, character_coverage=1.0))

    return shared_once(tmp_path_factory, "multiscript_spm", build)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With ALBERT_TF_TEST_TIMELINE=FILE, appends one JSON line per test (worker, start, end,
    node id, the worker's CPU seconds and its finished subprocesses'): which worker ran what
    when, and what each test costs."""
    path = os.environ.get("ALBERT_TF_TEST_TIMELINE")
    if not path:
        yield
        return
    import json
    import resource
    import time

    def children_cpu():
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    start, cpu, child = time.time(), time.process_time(), children_cpu()
    yield
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "start": start,
                            "end": time.time(), "cpu": round(time.process_time() - cpu, 2),
                            "children_cpu": round(children_cpu() - child, 2), "test": item.nodeid}) + "\n")


# The slowest modules under `make test` (measured), collected first: pytest-xdist hands whole
# modules to workers in collection order, and a slow module handed out last runs alone at the end.
SLOW_FIRST = ("test_precision_learning.py", "test_run_pretraining.py", "test_run_classifier.py", "test_serving.py",
              "test_full_disk.py", "test_kill_anywhere.py", "test_reproduce.py", "test_export.py",
              "test_single_writer.py", "test_damaged_files.py",
              "test_accumulation.py", "test_remat.py",
              "test_run_squad.py", "test_training.py", "test_run_race.py", "test_export_text_parity.py",
              "test_precision.py", "test_benchmarks_smoke.py", "test_buckets.py", "test_bucket_losses.py",
              "test_convert.py", "test_special_ids_end_to_end.py")


def pytest_configure(config):
    """Each process that runs tests (a pytest-xdist worker, or pytest alone; not xdist's
    controller) splits its CPU into two logical devices before TensorFlow starts its runtime:
    the tests of MirroredStrategy over /cpu:0 and /cpu:1 (tests/distributed_helpers.py) then
    run in this process. Everything else computes on /cpu:0 as before: TensorFlow places ops
    there, and on a machine without GPUs MirroredStrategy() and the commands' strategies use
    /cpu:0 alone."""
    if getattr(config, "workerinput", None) is None and config.getoption("numprocesses", None):
        return
    from distributed_helpers import split_cpu

    split_cpu()


def pytest_collection_finish(session):
    gc.freeze()


QUICK_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "quick_tests.txt")


def quick_tests():
    """The entries of tests/quick_tests.txt: node ids, tests/MODULE.py::TEST (each of its
    parametrizations) or tests/MODULE.py::TEST[ID]; none where the file is not there (a Bazel
    sandbox: tests/test_build.py then fails every module)."""
    if not os.path.exists(QUICK_TESTS):
        return []
    with open(QUICK_TESTS, encoding="utf-8") as f:
        return [entry for entry in (line.split("#")[0].strip() for line in f) if entry]


@pytest.hookimpl(tryfirst=True)  # the marks before `-m` selects by them
def pytest_collection_modifyitems(config, items):
    """The slowest modules first (SLOW_FIRST), and `quick` on the tests tests/quick_tests.txt
    names (`make test-quick` runs `-m quick`); the entries of collected modules that name no
    collected test are kept for tests/test_build.py as config.quick_entries_naming_no_test."""
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(os.path.basename(str(item.path)), len(rank)))
    # a learning check both carries the marker and takes the fixture (its seed, policy and record)
    for item in items:
        marked, takes = item.get_closest_marker("learning") is not None, "learning" in getattr(item, "fixturenames", ())
        if marked != takes:
            raise pytest.UsageError(f"{item.nodeid}: a learning check carries the learning marker and takes the "
                                    "learning fixture (tests/conftest.py); it has only one of them.")
    # a check comparing mixed_bfloat16 with float32 itself measures both in the float32 run
    _, policy = learning_settings()
    if policy not in (None, "float32"):
        skip = pytest.mark.skip(reason=f"compares mixed_bfloat16 with float32 itself: measured with "
                                       f"{LEARNING_POLICY}=float32, not {policy}")
        for item in items:
            marker = item.get_closest_marker("learning")
            if marker is not None and marker.kwargs.get("both_policies"):
                item.add_marker(skip)
    entries = set(quick_tests())
    named = set()
    for item in items:
        for key in {item.nodeid, item.nodeid.split("[")[0]} & entries:
            item.add_marker(pytest.mark.quick)
            named.add(key)
    modules = {item.nodeid.split("::")[0] for item in items}
    config.quick_entries_naming_no_test = sorted(e for e in entries - named if e.split("::")[0] in modules)
