"""Bad parameters raise errors naming the parameter and its allowed range."""

import pytest

from pentegg.golden import Config, ConfigError, make_noise


@pytest.mark.parametrize(
    "kw, pattern",
    [
        (dict(population=255), r"population=255 .*even number in 2\.\.4096"),
        (dict(population=0), r"population=0 .*2\.\.4096"),
        (dict(population=4098), r"population=4098"),
        (dict(rank=2), r"rank=2 .*one of \(1, 4, 16, 64\)"),
        (dict(rank=8), r"rank=8"),
        (dict(mode="full"), r"mode='full' .*lowrank"),
        (dict(digits="gauss"), r"digits='gauss' .*binomial"),
        (dict(sigma_shift=9), r"sigma_shift=9 .*0\.\.8"),
        (dict(layers=(64,)), r"layers=.*2\.\.9 widths"),
        (dict(layers=(64, 0, 10)), r"layers=.*1\.\.4096"),
        (dict(layers=(4,) * 10), r"layers=.*1\.\.8 weight layers"),
        (dict(act_shifts=(1,)), r"act_shifts=.*2 shifts, each 0\.\.15"),
        (dict(act_shifts=(1, 16)), r"act_shifts=.*0\.\.15"),
        (dict(shaping="z"), r"shaping='z'"),
        (dict(update="adam"), r"update='adam'"),
        (dict(tau=-1), r"tau=-1 .*0\.\.4095"),
        (dict(latent_bits=9), r"latent_bits=9 .*3\.\.8"),
        (dict(latent_shift=7), r"latent_shift=7 .*0\.\.6"),
        (dict(latent_bits=4, latent_shift=3), r"latent_shift=3 .*0\.\.2"),
        (dict(margin=0), r"margin=0 .*1\.\.254"),
        (dict(init="ones"), r"init='ones'"),
        (dict(seed=1 << 32), r"seed=.*0\.\.2\*\*32-1"),
        (dict(acc_bits=8), r"acc_bits=8 .*16\.\.48"),
    ],
)
def test_out_of_range_parameters_name_parameter_and_range(kw, pattern):
    with pytest.raises(ConfigError, match=pattern):
        Config(**kw).validate()


def test_accumulator_overflow_is_refused_with_the_needed_width():
    with pytest.raises(ConfigError, match=r"acc_bits=16 .*layer 0 \(acc\) needs 17 bits"):
        Config(layers=(64, 64, 10), acc_bits=16).validate()
    with pytest.raises(ConfigError, match=r"\(z\) needs"):
        Config(layers=(4096, 4096), rank=64, population=4096, acc_bits=32).validate()


def test_defaults_are_valid_and_widths_match_the_spec_table():
    cfg = Config().validate()
    assert cfg.widths() == {"acc": [17, 17], "z": [21, 21], "pert_product": [19, 19]}
    assert cfg.shifts() == (4, 4)


def test_steps_beyond_the_key_space_are_refused():
    with pytest.raises(ConfigError, match=r"step=65535 .*0\.\.65534"):
        make_noise(Config(layers=(2, 2), population=2), 65535)


def test_config_round_trips_through_dict():
    cfg = Config(layers=(5, 4, 3), act_shifts=(1, 2), population=8, mode="quantized")
    assert Config.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match="unknown config keys: bogus"):
        Config.from_dict({**cfg.to_dict(), "bogus": 1})
