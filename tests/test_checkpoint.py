"""State file (spec 11): round trip, atomic write, and refusal of bad files."""

import struct

import numpy as np
import pytest

from pentegg.golden import (
    Config,
    StateFileError,
    es_step_classify,
    init_state,
    load_state,
    save_state,
    weights_sha256,
)


def _state(update="latent"):
    cfg = Config(layers=(6, 5, 3), population=8, update=update, seed=2, init="random").validate()
    st = init_state(cfg)
    x, y = np.random.default_rng(0).integers(-127, 128, (10, 6)), np.arange(10) % 3
    for _ in range(3):
        st, _ = es_step_classify(st, x, y)
    return st


@pytest.mark.parametrize("update", ["latent", "pentary"])
def test_round_trip_keeps_every_bit(tmp_path, update):
    st = _state(update)
    p = tmp_path / "s.pegg"
    save_state(p, st, meta={"task": "x", "curve": [1, 2]})
    got, meta = load_state(p)
    assert got.cfg == st.cfg and got.step == st.step == 3
    assert weights_sha256(got) == weights_sha256(st)
    for a, b in zip(got.latent or [], st.latent or [], strict=True):
        assert (a == b).all()
    assert meta == {"task": "x", "curve": [1, 2]}
    assert [q.name for q in tmp_path.iterdir()] == ["s.pegg"], "temporary file left behind"


def test_atomic_overwrite_keeps_the_old_file_on_failure(tmp_path, monkeypatch):
    p = tmp_path / "s.pegg"
    save_state(p, _state())
    before = p.read_bytes()
    import os

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        save_state(p, _state("pentary"))
    assert p.read_bytes() == before
    assert [q.name for q in tmp_path.iterdir()] == ["s.pegg"]


@pytest.fixture
def saved(tmp_path):
    p = tmp_path / "s.pegg"
    save_state(p, _state())
    return p


def test_corrupt_byte_is_refused(saved):
    data = bytearray(saved.read_bytes())
    data[len(data) // 2] ^= 0x40
    saved.write_bytes(bytes(data))
    with pytest.raises(StateFileError, match="checksum mismatch"):
        load_state(saved)


def test_truncated_file_is_refused(saved):
    saved.write_bytes(saved.read_bytes()[:-5])
    with pytest.raises(StateFileError, match=r"checksum|corrupt"):
        load_state(saved)


def test_foreign_file_is_refused(tmp_path):
    p = tmp_path / "x.pegg"
    p.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    with pytest.raises(StateFileError, match="not a pentegg state file"):
        load_state(p)
    p.write_bytes(b"")
    with pytest.raises(StateFileError, match="not a pentegg state file"):
        load_state(p)


def test_other_format_version_is_refused(saved):
    import hashlib

    body = bytearray(saved.read_bytes()[:-32])
    struct.pack_into("<I", body, 8, 99)
    saved.write_bytes(bytes(body) + hashlib.sha256(body).digest())
    with pytest.raises(StateFileError, match="format version 99 is not supported"):
        load_state(saved)


def test_header_payload_mismatch_is_refused(saved):
    import hashlib
    import json

    data = saved.read_bytes()
    hlen = struct.unpack_from("<I", data, 12)[0]
    header = json.loads(data[16 : 16 + hlen])
    header["arrays"][0]["shape"] = [99, 99]
    hb = json.dumps(header).encode()
    body = data[:12] + struct.pack("<I", len(hb)) + hb + data[16 + hlen : -32]
    saved.write_bytes(body + hashlib.sha256(body).digest())
    with pytest.raises(StateFileError, match=r"does not match|truncated|wrong shape"):
        load_state(saved)


def test_missing_file_and_directory_give_clear_errors(tmp_path):
    with pytest.raises(StateFileError, match="no such file"):
        load_state(tmp_path / "nope.pegg")
    with pytest.raises(StateFileError, match="is a directory"):
        load_state(tmp_path)
