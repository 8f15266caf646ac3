"""tools/reproduce_pilot.py: the scarce topic task, the verdicts it gathers from its records
(hand-made numbers, the rule of tools/reproduce_stats.py) and its refusals. The pilot's
training runs are the grid's own steps (tests/test_reproduce.py runs them end to end)."""

import json
import os

from tools import reproduce_pilot as pilot
from tools import reproduce_steps as steps


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def test_the_scarce_topic_task_keeps_the_first_rows_of_each_label_and_the_whole_dev_set(tmp_path):
    paths = steps.Paths(str(tmp_path))
    train = [("s1", "os"), ("s2", "os"), ("s3", "json"), ("s4", "os"), ("s5", "json"), ("s6", "json")]
    dev = "sentence\tlabel\nd1\tos\nd2\tjson\n"
    text = "sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in train)
    _write(os.path.join(paths.task("topic"), "train.tsv"), text)
    _write(os.path.join(paths.task("topic"), "dev.tsv"), dev)
    assert pilot.make_scarce_topic(paths, 2) == {"train": 4, "per_class": 2}
    with open(os.path.join(paths.task(pilot.SCARCE), "train.tsv"), encoding="utf-8") as f:
        assert f.read() == "sentence\tlabel\ns1\tos\ns2\tos\ns3\tjson\ns5\tjson\n"
    with open(os.path.join(paths.task(pilot.SCARCE), "dev.tsv"), encoding="utf-8") as f:
        assert f.read() == dev
    try:
        pilot.make_scarce_topic(paths, 4)
    except ValueError as e:
        assert "--scarce_per_class=4" in str(e) and "only 3" in str(e)
    else:
        raise AssertionError("a class smaller than --scarce_per_class was not refused")


def test_each_checkpoint_is_judged_against_random_init_by_the_grids_rule(tmp_path):
    root = str(tmp_path)
    settings = {"checkpoints": [400, 1000], "seeds": 3, "scarce_per_class": 0}
    scores = {  # per source and task, three seeds
        "random": {"topic": [40.0, 41.0, 42.0], "squad": [10.0, 12.0, 14.0], "race": [25.0, 25.0, 25.0]},
        "step400": {"topic": [41.0, 42.0, 43.0], "squad": [30.0, 31.0, 32.0], "race": [25.0, 25.0, 25.0]},
        "step1000": {"topic": [50.0, 52.0, 54.0], "squad": [2.0, 3.0, 4.0], "race": [26.0, 26.0, 26.0]},
    }
    for source, tasks in scores.items():
        for task, values in tasks.items():
            for seed, value in enumerate(values, 1):
                steps.record_done(os.path.join(root, "pilot", "steps", f"{source}-{task}-{seed}.json"),
                                  {"score": value}, 10.0)
        if source != "random":
            steps.record_done(os.path.join(root, "pilot", "steps", f"{source}-eval-sop.json"),
                              {"masked_lm_accuracy": 0.09, "sentence_order_accuracy": 0.7}, 5.0)
    summary = pilot.gather(root, settings, {"topic_dev": 320, "squad_dev": 150, "race_dev": 54})
    verdicts = {(s, t): v["verdict"] for s, tasks in summary["versus_random"].items() for t, v in tasks.items()}
    # topic at 400: d = 1, se = sqrt(1/3 + 1/3) = 0.82: inside 2 se; at 1000: d = 11 > 2 x 1.29
    assert verdicts[("step400", "topic")] == "inconclusive" and verdicts[("step1000", "topic")] == "holds"
    assert verdicts[("step400", "squad")] == "holds" and verdicts[("step1000", "squad")] == "does not hold"
    # identical seeds: the floor of one dev question (100 / 54 = 1.85 points) keeps d = 1 inconclusive
    race = summary["versus_random"]["step1000"]["race"]
    assert race["verdict"] == "inconclusive" and race["se"] == 100 / 54 and race["d"] == 1.0
    step400 = summary["sources"]["step400"]
    assert step400["mlm_accuracy"] == 9.0 and step400["sop_accuracy"] == 70.0
    assert "mlm_accuracy" not in summary["sources"]["random"]
    lines = pilot.table(summary)
    assert lines[2].startswith("| random |  |  | 41.00 +- 1.00 | 12.00 +- 2.00 | 25.00 +- 0.00 |")
    assert "holds, d = +11.00" in lines[4]
    json.dumps(summary)  # pilot.json's content


def test_bad_flags_are_refused_before_any_work(tmp_path, capsys):
    out = str(tmp_path / "p")
    for flag, message in (("--checkpoints=150", "expected positive multiples of 100"),
                          ("--checkpoints=4x", "expected whole numbers of steps"),
                          ("--seeds=0", "--seeds must be at least 1")):
        assert pilot.main([f"--output_dir={out}", flag]) == 2
        assert message in capsys.readouterr().err
    assert not os.path.exists(out)
