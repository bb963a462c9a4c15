"""The streaming redactor: whole values, encodings, values cut across reads at every point,
overlapping values, what is held back (only a possible beginning of a secret) and short values."""

from __future__ import annotations

import random
import re

from launcher.executors.redaction import MARKER, MIN_SECRET_CHARS, StreamRedactor, redact_text, secret_patterns

SECRET = "hunter2-Zq9"


def _feed_in_pieces(r: StreamRedactor, data: bytes, cuts: list[int]) -> bytes:
    out, at = [], 0
    for c in [*cuts, len(data)]:
        out.append(r.feed(data[at:c]))
        at = c
    out.append(r.close())
    return b"".join(out)


def test_whole_value_and_its_common_encodings_become_the_marker():
    text = (
        "token=hunter2-Zq9\n"
        "b64 aHVudGVyMi1acTk= and unpadded aHVudGVyMi1acTk\n"
        "url pass%3Dw%2Frd%21 json \"pass=w/rd!\"\n"
    )
    out = redact_text(text, [SECRET, "pass=w/rd!"])
    assert out == "token=***\nb64 *** and unpadded ***\nurl *** json \"***\"\n"


def test_multi_line_value_printed_escaped_and_stripped():
    key = "-----BEGIN KEY-----\nAAAAB3Nz\n-----END KEY-----\n"
    printed = "{'key': '-----BEGIN KEY-----\\nAAAAB3Nz\\n-----END KEY-----\\n'}\n" + "raw -----BEGIN KEY-----\nAAAAB3Nz\n-----END KEY-----|\n"
    assert redact_text(printed, [key]) == "{'key': '***'}\nraw ***|\n"


def test_values_shorter_than_the_minimum_are_left_alone():
    assert MIN_SECRET_CHARS == 4
    assert secret_patterns(["abc", "", "  x "]) == []
    assert redact_text("abc abcd", ["abc", "abcd"]) == "abc ***"


def test_a_value_cut_at_every_point_of_two_reads_is_still_redacted():
    data = b"start hunter2-Zq9 mid hunter2-Zq9hunter2-Zq9 end\n"
    expected = b"start *** mid *** end\n"  # two adjacent copies: one run of secret bytes, one marker
    for i in range(len(data) + 1):
        for j in range(i, len(data) + 1):
            r = StreamRedactor.for_values([SECRET])
            assert _feed_in_pieces(r, data, [i, j]) == expected, (i, j)


def test_a_value_fed_one_byte_at_a_time():
    data = "é=hunter2-Zq9;\n".encode()
    r = StreamRedactor.for_values([SECRET])
    assert _feed_in_pieces(r, data, list(range(1, len(data)))) == "é=***;\n".encode()


def test_only_a_possible_beginning_of_a_secret_is_held_back():
    r = StreamRedactor.for_values([SECRET])
    assert r.feed(b"ready\n") == b"ready\n"  # a finished line goes out at once
    assert r.feed(b"tok=hunt") == b"tok="  # 'hunt' may be the start of the secret
    assert r.feed(b"ing season\n") == b"hunting season\n"  # it was not
    assert r.feed(b"x=hunter2-Zq9") == b"x=***"  # a whole value at the end of a read is not held
    assert r.close() == b""


def test_overlapping_values_are_covered_whole():
    r = StreamRedactor.for_values(["abcd1234", "1234wxyz"])
    assert r.feed(b"<abcd1234") == b"<"  # '1234' may begin the second value: hold the first too
    assert r.feed(b"wxyz>\n") == b"***>\n"


def test_end_of_stream_redacts_a_cut_off_beginning_of_minimum_length():
    r = StreamRedactor.for_values([SECRET])
    assert r.feed(b"a hunt") == b"a "
    assert r.close() == MARKER.encode()
    r = StreamRedactor.for_values([SECRET])
    assert r.feed(b"a hun") == b"a "
    assert r.close() == b"hun"  # three bytes: not enough to say anything


def test_no_secrets_is_a_pass_through():
    r = StreamRedactor.for_values([])
    assert r.feed(b"anything\n") == b"anything\n" and r.close() == b""


def _oracle(text: bytes, patterns: list[bytes]) -> bytes:
    """Mark every byte inside any occurrence (overlapping ones too, found by a regex lookahead),
    then write one marker per run of marked bytes."""
    marked = [False] * len(text)
    for p in patterns:
        for m in re.finditer(b"(?=" + re.escape(p) + b")", text):
            for k in range(m.start(), m.start() + len(p)):
                marked[k] = True
    out, k = [], 0
    while k < len(text):
        if marked[k]:
            while k < len(text) and marked[k]:
                k += 1
            out.append(MARKER.encode())
        else:
            out.append(text[k : k + 1])
            k += 1
    return b"".join(out)


def test_random_streams_agree_with_a_whole_text_oracle():
    rng = random.Random(7)
    values = ["abab", "babx", "secret-42", "cret"]
    patterns = secret_patterns(values)
    alphabet = ["a", "b", "x", "secret-42", "cret", "-", " ", "s"]
    for _ in range(400):
        text = ("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) + "\n").encode()
        cuts = sorted(rng.sample(range(len(text) + 1), k=min(len(text) + 1, rng.randint(0, 6))))
        got = _feed_in_pieces(StreamRedactor(patterns), text, cuts)
        assert got == _oracle(text, patterns), (text, cuts)


def test_an_endless_run_of_overlapping_occurrences_is_released_redacted():
    r = StreamRedactor.for_values(["aaaa"])
    out = b"".join(r.feed(b"a" * 4096) for _ in range(40))  # 160 KiB, no line end
    assert r.held_bytes <= 64 * 1024 + 4096  # not all of it
    assert out == b"***" and r.feed(b"b\n") == b"b\n" and r.close() == b""
