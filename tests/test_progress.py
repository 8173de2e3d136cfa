import io

from pentegg.progress import Progress


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_shows_step_metric_and_rate_on_a_terminal():
    s = Tty()
    p = Progress(10, "digits", stream=s)
    p.update(10, "test_accuracy 0.950")
    p.close()
    out = s.getvalue()
    assert "step 10/10" in out and "test_accuracy 0.950" in out and "steps/s" in out
    assert out.startswith("\r") and out.endswith("\n")


def test_progress_is_silent_off_a_terminal_and_when_disabled():
    s = io.StringIO()  # not a tty
    p = Progress(5, "x", stream=s)
    p.update(5, "m")
    p.close()
    q = Progress(5, "x", stream=Tty(), enabled=False)
    q.update(5, "m")
    q.close()
    assert s.getvalue() == "" and q.stream.getvalue() == ""
