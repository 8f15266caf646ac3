"""notebooks/finetune_with_hub.ipynb runs end to end (nbclient) on a tiny export."""

import json
import os

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
NOTEBOOK = os.path.join(ROOT, "notebooks", "finetune_with_hub.ipynb")


def test_finetune_with_hub_notebook_executes(tiny_export, tmp_path, monkeypatch):
    out = tmp_path / "out"
    for name, value in {"ALBERT_EXPORT_DIR": tiny_export["hub"], "ALBERT_OUTPUT_DIR": str(out),
                        "ALBERT_SEQ_LENGTH": "32", "ALBERT_EPOCHS": "6", "ALBERT_MAX_TRAIN_EXAMPLES": "512",
                        "ALBERT_LEARNING_RATE": "5e-3", "TF_CPP_MIN_LOG_LEVEL": "3"}.items():
        monkeypatch.setenv(name, value)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not cell.get("outputs") for cell in nb.cells if cell.cell_type == "code")  # shipped clean
    source = "\n".join(cell.source for cell in nb.cells)
    assert "hub.KerasLayer(os.path.join(EXPORT_DIR, \"encoder\"), trainable=True" in source
    # raises CellExecutionError (with the cell and its traceback) if any cell fails
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": os.path.dirname(NOTEBOOK)}}).execute()

    results = json.loads((out / "finetune_results.json").read_text())
    assert results["train_examples"] == 512 and results["labels"] == ["concurrency", "networking", "numbers", "text"]
    assert len(results["history"]["loss"]) == 6 and len(results["history"]["val_accuracy"]) == 6
    assert results["history"]["loss"][-1] < results["history"]["loss"][0]  # it learns
    # the fine-tuned model beats always answering the majority class, and the reported
    # accuracy is what its confusion matrix says
    assert results["majority_baseline"] == 0.25
    assert results["dev_accuracy"] > results["majority_baseline"] + 0.1, results["dev_accuracy"]
    confusion = results["confusion"]
    assert sum(map(sum, confusion)) == 448
    assert results["dev_accuracy"] == pytest.approx(sum(confusion[i][i] for i in range(4)) / 448)
    assert (out / "finetune_curves.png").stat().st_size > 10_000
    printed = "".join(o.get("text", "") for cell in nb.cells for o in cell.get("outputs", []))
    assert "dev accuracy" in printed and "majority-class baseline" in printed
    assert any(o.get("output_type") == "display_data" and "image/png" in o.get("data", {})
               for cell in nb.cells for o in cell.get("outputs", []))
