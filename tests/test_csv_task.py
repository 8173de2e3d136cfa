"""csv:PATH: parsing, int8 scaling, split, and one-line errors naming row or column."""

import json
import subprocess

import numpy as np
import pytest

from pentegg.tasks import CsvTask, TaskError


def write(tmp_path, text, name="t.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def table(n=40, header=True):
    rng = np.random.default_rng(0)
    rows = ["a,b,label"] if header else []
    for i in range(n):
        y = i % 2
        rows.append(f"{rng.normal(y * 3, 1):.3f},{rng.normal(-y, 1):.3f},{y + 5}")
    return "\n".join(rows) + "\n"


@pytest.mark.parametrize("header", [True, False])
def test_reads_with_or_without_header(tmp_path, header):
    t = CsvTask(str(write(tmp_path, table(header=header))))
    assert t.n_inputs == 2 and t.n_outputs == 2
    assert t.classes.tolist() == [5, 6]
    assert len(t.x_train) == 32 and len(t.x_test) == 8
    assert t.x_train.dtype == np.int8 and np.abs(t.x_train).max() <= 127


def test_scaling_rule_is_fitted_on_the_training_rows(tmp_path):
    t = CsvTask(str(write(tmp_path, table())))
    c, h = np.array(t.scaler["center"]), np.array(t.scaler["half"])
    # training rows span exactly -127..127 in every feature
    assert (t.x_train.min(axis=0) == -127).all() and (t.x_train.max(axis=0) == 127).all()
    assert (h > 0).all() and c.shape == (2,)


def test_split_is_seeded(tmp_path):
    p = str(write(tmp_path, table()))
    a, b, c = CsvTask(p, 0), CsvTask(p, 0), CsvTask(p, 1)
    assert (a.y_test == b.y_test).all() and (a.x_test == b.x_test).all()
    assert not (a.x_test == c.x_test).all()


@pytest.mark.parametrize(
    "text, msg",
    [
        ("a,b,label\n1,2,0\n3,,1\n" + "1,2,0\n" * 10, "row 3, column 'b': missing value"),
        ("a,b,label\n1,2,0\n3,x7,1\n" + "1,2,1\n" * 10, "row 3, column 'b': 'x7' is not a number"),
        ("a,b,label\n" + "1,2,3\n" * 12, "single class"),
        ("a,b,label\n" + "1,2,0\n1,2,1\n" * 4, "8 data rows; need at least 10"),
        ("a,b,label\n1,2,0\n1,2\n" + "1,2,1\n" * 10, "row 3 has 2 columns, expected 3"),
        ("a,b,label\n" + "1,2,0\n1,2,1\n" * 5 + "1,2,cat\n", "class label 'cat' is not an integer"),
        ("a,b,label\n" + "1,2,0\n1,nan,1\n" * 5, "'nan' is not a finite number"),
        ("", "the file is empty"),
        ("label\n" + "1\n" * 12, "need at least one feature column"),
        (
            "a,b,label\n" + "1,2,0\n1,2,1\n" * 5 + "1,2,99999999999999999999\n",
            "row 12, column 'label': class label '99999999999999999999' is out of range",
        ),
        ("a,b,label\n" + "1,2,0\n1,2,1\n" * 5 + "1,\x01x,1\n", r"'\\x01x' is not a number"),
        ("a,b,label\n" + "1,2,0\n1,2,1\n" * 5 + "1,\0,1\n", r"'\\x00' is not a number"),
        ("a,b,label\n" + "1,2,0\n1,2,1\n" * 5 + "1," + "2" * 200_000 + ",1\n", "not a CSV table"),
    ],
)
def test_malformed_files_name_the_row_or_column(tmp_path, text, msg):
    with pytest.raises(TaskError, match=msg):
        CsvTask(str(write(tmp_path, text)))


def test_a_models_scaler_and_classes_must_match_the_file(tmp_path):
    """Evaluating or resuming with a model's scaler and class list (its state file's
    metadata): a file with another number of feature columns, or a label the model has
    no output for, is a one-line error, not a numpy broadcast error or a silently
    shifted label."""
    p = str(write(tmp_path, table()))  # 2 features, labels 5 and 6
    t = CsvTask(p)
    again = CsvTask(p, scaler=t.scaler, classes=t.classes.tolist())
    assert (again.y_all == t.y_all).all() and (again.x_all == t.x_all).all()
    with pytest.raises(TaskError, match="2 feature columns; the model was trained on 1"):
        CsvTask(p, scaler={"center": [0.0], "half": [1.0]})
    with pytest.raises(TaskError, match="the model's feature scaler is malformed"):
        CsvTask(p, scaler={"centre": [0.0, 0.0]})
    with pytest.raises(TaskError, match="class label 5 is not one the model was trained on"):
        CsvTask(p, scaler=t.scaler, classes=[0, 6])
    with pytest.raises(TaskError, match="split seed -1 is not an integer"):
        CsvTask(p, split_seed=-1)


def test_missing_file(tmp_path):
    with pytest.raises(TaskError, match="no such file"):
        CsvTask(str(tmp_path / "none.csv"))


def test_cli_trains_on_a_csv_and_errors_are_one_line(pentegg_cmd, tmp_path):
    p = write(tmp_path, table(120))
    r = subprocess.run(
        [
            *pentegg_cmd,
            "train",
            "--task",
            f"csv:{p}",
            "--steps",
            "60",
            "--quiet",
            "--json",
            "--population",
            "32",
            "--out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,  # no timeout: 60 steps cannot hang, only run slowly
    )
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    assert rec["metric"] == "test_accuracy" and rec["value"] >= 0.8
    ev = subprocess.run(
        [*pentegg_cmd, "eval", "--task", f"csv:{p}", "--model", str(tmp_path / "run"), "--json"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert ev.returncode == 0 and json.loads(ev.stdout)["value"] == rec["value"]
    bad = write(tmp_path, "a,b,label\n1,2,0\n3,,1\n" + "1,2,1\n" * 10, "bad.csv")
    r = subprocess.run(
        [*pentegg_cmd, "train", "--task", f"csv:{bad}"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "row 3, column 'b': missing value" in r.stderr
