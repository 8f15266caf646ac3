"""notebooks/finetune_with_hub.ipynb runs end to end (nbclient, through tools/demo.py's
execute_notebook) on a tiny export; that runner's kernel talks over IPC, not plain TCP."""

import json
import os

import nbformat
import pytest

from nbclient import NotebookClient
from tools import demo

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
NOTEBOOK = os.path.join(ROOT, "notebooks", "finetune_with_hub.ipynb")
pytestmark = pytest.mark.real_process  # a notebook runs in a kernel, a process nbclient starts


@pytest.mark.learning
def test_finetune_with_hub_notebook_executes(tiny_export, tmp_path, monkeypatch, capfd, learning):
    out = tmp_path / "out"
    export = tiny_export["hub"]  # the session's float32 export
    if learning.policy not in (None, "float32"):  # forced: its model exported computing in that policy
        export = learning.hub_export(export, _pretrainer(tiny_export["pretrained"]), tiny_export["spm"],
                                     tmp_path / "hub", 32)
    if learning.seed is not None:
        monkeypatch.setenv("ALBERT_SEED", str(learning.seed))  # the notebook's seed (classifier, dropout, order)
    for name, value in {"ALBERT_EXPORT_DIR": export, "ALBERT_OUTPUT_DIR": str(out),
                        "ALBERT_SEQ_LENGTH": "32", "ALBERT_EPOCHS": "6", "ALBERT_MAX_TRAIN_EXAMPLES": "512",
                        "ALBERT_LEARNING_RATE": "5e-3", "TF_CPP_MIN_LOG_LEVEL": "3"}.items():
        monkeypatch.setenv(name, value)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not cell.get("outputs") for cell in nb.cells if cell.cell_type == "code")  # shipped clean
    source = "\n".join(cell.source for cell in nb.cells)
    assert "hub.KerasLayer(os.path.join(EXPORT_DIR, \"encoder\"), trainable=True" in source
    # raises CellExecutionError (with the cell and its traceback) if any cell fails
    capfd.readouterr()
    demo.execute_notebook(nb, timeout=600, resources={"metadata": {"path": os.path.dirname(NOTEBOOK)}})
    # the kernel's stderr reached this process's without the lines TensorFlow prints while it
    # loads (the kernel imported TensorFlow: the notebook ran), TF_CPP_MIN_LOG_LEVEL being 3
    kernel_stderr = capfd.readouterr().err
    assert "absl::InitializeLog" not in kernel_stderr and "oneDNN custom operations" not in kernel_stderr, \
        kernel_stderr

    results = json.loads((out / "finetune_results.json").read_text())
    assert results["train_examples"] == 512 and results["labels"] == ["concurrency", "networking", "numbers", "text"]
    assert len(results["history"]["loss"]) == 6 and len(results["history"]["val_accuracy"]) == 6
    learning.record("loss_drop", results["history"]["loss"][0] - results["history"]["loss"][-1], 0.0, "higher",
                    strict=True)
    assert results["history"]["loss"][-1] < results["history"]["loss"][0]  # it learns
    # the fine-tuned model beats always answering the majority class, and the reported
    # accuracy is what its confusion matrix says
    assert results["majority_baseline"] == 0.25
    learning.record("dev_accuracy", results["dev_accuracy"], results["majority_baseline"] + 0.1, "higher", strict=True)
    assert results["dev_accuracy"] > results["majority_baseline"] + 0.1, results["dev_accuracy"]
    confusion = results["confusion"]
    assert sum(map(sum, confusion)) == 448
    assert results["dev_accuracy"] == pytest.approx(sum(confusion[i][i] for i in range(4)) / 448)
    assert (out / "finetune_curves.png").stat().st_size > 10_000
    printed = "".join(o.get("text", "") for cell in nb.cells for o in cell.get("outputs", []))
    assert "dev accuracy" in printed and "majority-class baseline" in printed
    assert any(o.get("output_type") == "display_data" and "image/png" in o.get("data", {})
               for cell in nb.cells for o in cell.get("outputs", []))


def _pretrainer(directory):
    from albert_tf import AlbertPretrainer

    return AlbertPretrainer.from_pretrained(directory)


def test_the_notebook_runner_uses_ipc_without_the_unencrypted_tcp_warning(capfd, tmp_path, monkeypatch):
    """ipykernel warns "Kernel is running over TCP without encryption" on its stderr (the
    test's, which capfd reads: the cell's own write to fd 2 shows it) when started over
    TCP; the demo's runner starts it over IPC, leaves no socket files behind and shuts
    the kernel down."""
    monkeypatch.chdir(tmp_path)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import os\nos.write(2, b'kernel stderr reaches the test\\n')\nprint(6 * 7, os.getpid())")])
    demo.execute_notebook(nb, NotebookClient, timeout=120)
    out, err = capfd.readouterr()
    [output] = nb.cells[0].outputs
    answer, kernel_pid = output["text"].split()
    assert answer == "42" and int(kernel_pid) != os.getpid()
    assert "kernel stderr reaches the test" in err
    assert "without encryption" not in out + err, err
    assert os.listdir(tmp_path) == []
    assert not os.path.exists(f"/proc/{kernel_pid}")  # the kernel was shut down (and reaped)
