"""tools/demo.py's filter of the stderr of the processes it starts (its steps, the notebook's
kernel): TensorFlow's loading lines below TF_CPP_MIN_LOG_LEVEL are left out, everything else
passes in order (the kernel's: tests/test_notebook.py)."""

import os

import pytest
from tools import demo

HEADER = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
# as TensorFlow 2.21 prints them while loading (absl's pre-initialisation time stamp) and as
# absl prints them later
INFO = "I0000 00:00:1795758206.439373    5191 cudart_stub.cc:31] Could not find cuda drivers on your machine."
WARNING = "W1127 05:30:12.123456   77 gpu_device.cc:2341] Cannot dlopen some GPU libraries."
ERROR = "E0000 00:00:1795758455.288861   15033 cuda_platform.cc:52] failed call to cuInit"
FATAL = "F0000 00:00:1795758455.3   15033 cpu_feature_guard.cc:1] The TensorFlow library was compiled to use AVX"


def test_the_loading_lines_hidden_follow_tf_cpp_min_log_level():
    hidden_loading_line = demo.hidden_loading_line
    others = ["Traceback (most recent call last):", "I0000 not a log line", "a Python warning", ""]
    for level, hidden in ((0, set()), (1, {HEADER, INFO}), (2, {HEADER, INFO, WARNING}),
                          (3, {HEADER, INFO, WARNING, ERROR}), (4, {HEADER, INFO, WARNING, ERROR})):
        for line in (HEADER, INFO, WARNING, ERROR, FATAL, *others):
            for ending in ("", "\n", "\r\n"):
                assert hidden_loading_line(line + ending, level) == (line in hidden), (level, line, ending)


@pytest.mark.real_process  # a step is a process of its own: what reaches the file descriptors
def test_a_demo_step_shows_its_stderr_less_the_loading_lines(capfd, monkeypatch):
    """A step (a process the demo starts) printing like TensorFlow while it loads, then a
    Python line and a fatal line: at level 3 only those two reach stderr, in order; its
    stdout passes as it is; a failed step stops the demo with its exit status."""
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    code = (f"import os, sys; os.write(2, b'{HEADER}\\n{INFO}\\n{ERROR}\\n'); print('out', flush=True); "
            f"sys.stderr.write('a Python line\\n'); sys.stderr.flush(); os.write(2, b'{FATAL}\\n'); "
            "sys.exit(int(sys.argv[1]))")
    capfd.readouterr()
    demo._step(1, 2, "a step", ["-c", code, "0"])
    out, err = capfd.readouterr()
    assert err.splitlines() == ["a Python line", FATAL]
    assert out.splitlines()[1:3] == ["[1/2] a step", "out"] and out.splitlines()[3].startswith("      done in ")
    with pytest.raises(SystemExit, match="demo: step 2 failed with exit status 3; its output is above."):
        demo._step(2, 2, "a failing step", ["-c", code, "3"])
    assert capfd.readouterr().err.splitlines() == ["a Python line", FATAL]


@pytest.mark.real_process
def test_a_demo_command_that_loads_tensorflow_starts_without_its_loading_lines(tmp_path, capfd, monkeypatch):
    """The start-up of the demo's classifier step, a real process that loads TensorFlow (which
    prints its loading lines before it reads TF_CPP_MIN_LOG_LEVEL), refused here for want of a
    SentencePiece model: its error line alone on stderr, and the demo stops with its status."""
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    monkeypatch.setenv("PYTHONPATH", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    capfd.readouterr()
    with pytest.raises(SystemExit, match="demo: step 9 failed with exit status 2"):
        demo._step(9, 10, "fine-tuning", ["-m", "albert_tf.run_classifier", "--task_name=tsv", f"--data_dir={tmp_path}",
                                          f"--output_dir={tmp_path / 'classifier'}", "--do_train"])
    err = capfd.readouterr().err
    assert err == "run_classifier: error: --spm_model_file is required without --albert_hub_module_handle.\n", err
