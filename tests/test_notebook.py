"""notebooks/finetune_with_hub.ipynb runs end to end (nbclient) on a tiny export."""

import json
import os

import nbformat
from nbclient import NotebookClient

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
NOTEBOOK = os.path.join(ROOT, "notebooks", "finetune_with_hub.ipynb")


def test_finetune_with_hub_notebook_executes(tiny_export, tmp_path, monkeypatch):
    out = tmp_path / "out"
    for name, value in {"ALBERT_EXPORT_DIR": tiny_export["hub"], "ALBERT_OUTPUT_DIR": str(out),
                        "ALBERT_SEQ_LENGTH": "32", "ALBERT_EPOCHS": "3", "ALBERT_MAX_TRAIN_EXAMPLES": "256",
                        "ALBERT_LEARNING_RATE": "1e-3", "TF_CPP_MIN_LOG_LEVEL": "3"}.items():
        monkeypatch.setenv(name, value)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not cell.get("outputs") for cell in nb.cells if cell.cell_type == "code")  # shipped clean
    source = "\n".join(cell.source for cell in nb.cells)
    assert "hub.KerasLayer(os.path.join(EXPORT_DIR, \"encoder\"), trainable=True" in source
    # raises CellExecutionError (with the cell and its traceback) if any cell fails
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": os.path.dirname(NOTEBOOK)}}).execute()

    results = json.loads((out / "finetune_results.json").read_text())
    assert results["train_examples"] == 256 and results["labels"] == ["concurrency", "networking", "numbers", "text"]
    assert len(results["history"]["loss"]) == 3 and len(results["history"]["val_accuracy"]) == 3
    assert results["history"]["loss"][-1] < results["history"]["loss"][0]  # it learns
    assert 0 <= results["dev_accuracy"] <= 1 and results["majority_baseline"] == 0.25
    assert sum(map(sum, results["confusion"])) == 448
    assert (out / "finetune_curves.png").stat().st_size > 10_000
    printed = "".join(o.get("text", "") for cell in nb.cells for o in cell.get("outputs", []))
    assert "dev accuracy" in printed and "majority-class baseline" in printed
    assert any(o.get("output_type") == "display_data" and "image/png" in o.get("data", {})
               for cell in nb.cells for o in cell.get("outputs", []))
