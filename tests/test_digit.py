import numpy as np
import pytest

from pentegg.golden import DigitRangeError, decode, encode, pack, packed_bytes, unpack


def test_codes_are_three_bit_twos_complement():
    assert encode([-2, -1, 0, 1, 2]).tolist() == [0b110, 0b111, 0b000, 0b001, 0b010]
    assert decode([0b110, 0b111, 0b000, 0b001, 0b010]).tolist() == [-2, -1, 0, 1, 2]


@pytest.mark.parametrize("code", [0b011, 0b100, 0b101])
def test_invalid_codes_are_refused(code):
    with pytest.raises(DigitRangeError, match="invalid digit code"):
        decode([0, code])


@pytest.mark.parametrize("n", [1, 4, 5, 6, 10, 11, 1000])
def test_pack_roundtrip_and_word_count(n):
    d = np.random.default_rng(n).integers(-2, 3, n)
    words = pack(d)
    assert words.dtype == np.uint16 and len(words) == -(-n // 5)
    assert not (words >> 15).any(), "bit 15 must be zero"
    assert unpack(words, n).tolist() == d.tolist()


def test_padding_is_the_code_of_zero():
    assert pack([1]).tolist() == [0b001]
    assert pack([-1, -1]).tolist() == [0b111_111]


def test_digit_position_in_word():
    for i in range(5):
        d = [0] * 5
        d[i] = -2
        assert pack(d).tolist() == [0b110 << (3 * i)]


def test_out_of_range_digits_name_the_value_and_range():
    with pytest.raises(DigitRangeError, match=r"value 3 at flat index 2 .*-2\.\.2"):
        pack([0, 1, 3])
    with pytest.raises(DigitRangeError, match="value -3"):
        encode(np.array([[0, -3]]))


def test_storage_format_packs_each_matrix_from_a_word_boundary():
    a, b = np.ones((2, 3), np.int8), -np.ones((1, 1), np.int8)
    raw = packed_bytes([a, b])
    assert len(raw) == 2 * (2 + 1)  # 6 digits -> 2 words, 1 digit -> 1 word
    assert raw[4:] == (0b111).to_bytes(2, "little")
