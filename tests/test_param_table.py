import csv

from conftest import run_in_process

from albert_tf import param_table


def test_every_count_equals_the_reference():
    rows = param_table.build_rows()
    assert len(rows) == 15
    by_model = {r["model"]: r["built"] for r in rows}
    assert by_model["albert_base"] == 11_683_584
    assert by_model["albert_xxlarge"] == 222_595_584
    assert by_model["bert_xlarge"] == 1_275_291_648
    assert by_model["albert_base E=128 attention"] == 63_647_232
    mismatched = [(r["model"], r["built"], r["reference"]) for r in rows if not r["match"]]
    assert not mismatched


def _memory_mb(key):
    """This process's VmHWM (peak resident set) or VmRSS (resident set), in MB."""
    with open("/proc/self/status", encoding="utf-8") as f:
        return int(next(line for line in f if line.startswith(key + ":")).split()[1]) // 1024


def test_cli_prints_and_writes_csv_without_allocating_weights(tmp_path):
    # the command's own peak in this process: the peak (VmHWM) is reset to the resident set
    # before it runs (Linux's /proc/self/clear_refs "5"), so what it allocates is the peak's growth
    before = _memory_mb("VmRSS")
    with open("/proc/self/clear_refs", "w", encoding="utf-8") as f:
        f.write("5")
    result = run_in_process(param_table, [f"--output_dir={tmp_path}"])
    rss = _memory_mb("VmHWM") - before
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Table 5" in result.stdout and "1,275,291,648" in result.stdout
    # bert_xlarge alone holds 5.1 GB of fp32 weights; the table must need far less; allocating
    # the weights would put the peak's growth above 5,100 MB.
    assert rss < 4000, rss
    with open(tmp_path / "param_table.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 15 and all(r["match"] == "True" for r in rows)
