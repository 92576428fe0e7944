"""``python -m naaice.swnaa``: Python kernels of the user's modules served from the command
line, reloaded on SIGHUP, and clear errors for what cannot be served."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import naaice

MODULE = """
import numpy as np

FACTOR = {factor}


def scale(params, call):
    params[0].view(np.float64)[:] *= FACTOR


def fail(params, call):
    raise RuntimeError("boom")


def code(params, call):
    return 0x42
"""


def write_module(folder, factor, extra=""):
    (folder / "kmod.py").write_text(MODULE.format(factor=factor) + extra)


class Served:
    """A ``python -m naaice.swnaa`` process on a free loopback port."""

    def __init__(self, folder, *args):
        env = dict(os.environ, NAAICE_TRANSPORT="soft", PYTHONDONTWRITEBYTECODE="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "naaice.swnaa", "--address", "127.0.0.1", "--port", "0",
             *args],
            cwd=folder, env=env, stderr=subprocess.PIPE, text=True,
        )
        self.banner = self.line_with("listening on")
        self.address = self.banner.split()[3]

    def line_with(self, needle, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                raise AssertionError(f"ended before a line with {needle!r}")
            if needle in line:
                return line
        raise AssertionError(f"no line with {needle!r}")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=30) == 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc.stderr.close()


def run(address, code, x):
    with naaice.Naa(code, [x], [x], address=address) as naa:
        return naa.run()


def test_python_kernels_of_a_module_are_served_and_reloaded_on_sighup(tmp_path):
    write_module(tmp_path, 2.0)
    (tmp_path / "kernels.toml").write_text(textwrap.dedent("""
        [[kernel]]
        code = 9
        module = "kmod"
        function = "code"
        name = "the answer"
    """))
    with Served(tmp_path, "--kernel", "7=kmod:scale", "--kernel", "8=kmod:fail",
                "--kernels", "kernels.toml") as s:
        assert "kernels 1 add1, 2 add2, 3 empty, 7 scale, 8 fail, 9 the answer)" in s.banner
        x = np.arange(16, dtype=np.float64)
        assert run(s.address, 7, x).ok
        np.testing.assert_array_equal(x, 2 * np.arange(16))
        assert run(s.address, 8, x).return_code == 3  # the exception: KERNEL_FAILED
        assert run(s.address, 9, x).return_code == 0x42
        # The module changes and the file gains code 10: SIGHUP serves both.
        write_module(tmp_path, 3.0, "\n# version 2\n")
        with open(tmp_path / "kernels.toml", "a") as f:
            f.write('\n[[kernel]]\ncode = 10\nmodule = "kmod"\nfunction = "scale"\n'
                    "timeout = 5\n")
        s.proc.send_signal(signal.SIGHUP)
        line = s.line_with("kernels reloaded")
        assert "7 scale, 8 fail, 9 the answer, 10 scale" in line
        x = np.ones(16)
        assert run(s.address, 7, x).ok
        assert run(s.address, 10, x).ok
        np.testing.assert_array_equal(x, np.full(16, 9.0))
        # A reload that fails keeps the kernels served.
        (tmp_path / "kmod.py").write_text("def scale(:\n")
        s.proc.send_signal(signal.SIGHUP)
        line = s.line_with("kernels not reloaded")
        assert "cannot import kmod: SyntaxError" in line
        assert run(s.address, 7, x).ok
        np.testing.assert_array_equal(x, np.full(16, 27.0))
        s.stop()


@pytest.mark.parametrize(
    "args, status, message",
    [
        (["--kernel", "7=nosuchmodule:scale"], 1,
         "--kernel 7=nosuchmodule:scale: cannot import nosuchmodule: ModuleNotFoundError"),
        (["--kernel", "7=kmod:nosuch"], 1, "--kernel 7=kmod:nosuch: kmod has no nosuch"),
        (["--kernel", "7=kmod:FACTOR"], 1, "kmod.FACTOR is not callable"),
        (["--kernel", "7=kmod:scale", "--kernel", "7=kmod:fail"], 1,
         "function code 7: --kernel 7=kmod:fail collides with --kernel 7=kmod:scale"),
        (["--kernel", "0=kmod:scale"], 2, "function code '0' is not 1-127"),
        (["--kernel", "7=kmod"], 2, "expected CODE=MODULE:FUNCTION"),
        (["--kernels", "missing.toml"], 1, "kernels file missing.toml:"),
        (["--kernels", "/dev/zero"], 1, "kernels file /dev/zero: not a regular file"),
    ],
)
def test_what_cannot_be_served_is_a_clear_start_up_error(tmp_path, args, status, message):
    write_module(tmp_path, 2.0)
    env = dict(os.environ, NAAICE_TRANSPORT="soft")
    out = subprocess.run(
        [sys.executable, "-m", "naaice.swnaa", "--address", "127.0.0.1", "--port", "0", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == status, out.stderr
    assert message in out.stderr


def test_a_kernels_file_with_a_mistake_names_it(tmp_path):
    write_module(tmp_path, 2.0)
    for text, message in [
        ('[[kernel]]\ncode = 7\nmodule = "kmod"\nfunction = "scale"\nlibrary = "x"\n',
         "kernel 1: unknown field(s) ['library']"),
        ('[[kernel]]\ncode = 300\nmodule = "kmod"\nfunction = "scale"\n', "code 300 is not 1-127"),
        ('[[kernel]]\ncode = 7\nfunction = "scale"\n', "module missing"),
        ('[[kernel]]\ncode = 7\nmodule = "kmod"\nfunction = "scale"\ntimeout = 0\n',
         "timeout must be seconds, more than 0"),
        ("[[kernel]\n", "kernels file k.toml:"),
    ]:
        (tmp_path / "k.toml").write_text(text)
        out = subprocess.run(
            [sys.executable, "-m", "naaice.swnaa", "--port", "0", "--kernels", "k.toml"],
            cwd=tmp_path, capture_output=True, text=True, timeout=60,
        )
        assert out.returncode == 1, out.stderr
        assert message in out.stderr, (text, out.stderr)


def test_set_kernels_replaces_what_a_server_serves():
    import naaice.swnaa

    def triple(params, call):
        params[0][:] *= 3

    with naaice.swnaa.Server(kernels={20: triple}) as server:
        assert server.kernels == {1: "add1", 2: "add2", 3: "empty", 20: "triple"}
        x = bytearray([1, 2])
        assert run(server.address, 20, x).ok and x == bytearray([3, 6])
        server.set_kernels({21: triple}, builtins=False)
        assert server.kernels == {21: "triple"}
        assert run(server.address, 20, x).return_code == 1  # SOCKET_UNAVAIL
        assert run(server.address, 21, x).ok and x == bytearray([9, 18])
