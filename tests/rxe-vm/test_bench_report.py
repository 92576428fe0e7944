#!/usr/bin/env python3
"""Tests of bench_report.py on made-up result folders (no VM): python3 tests/rxe-vm/test_bench_report.py"""

import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_report  # noqa: E402

HEADER = (
    "byte_length,steady_rpc_us,fresh_transfer_us,fresh_setup_us,"
    "steady_cpu_client_us,steady_cpu_others_us\n"
)


def perftest(folder, tool, size, typical=None, bw=None):
    """A perftest client output with one result line."""
    folder.mkdir(parents=True, exist_ok=True)
    if tool.endswith("_bw"):
        row = f"{size} 1000 {bw} {bw} 0.1"  # bytes iters peak average msgrate
    else:
        row = f"{size} 1000 1.0 99.0 {typical} {typical} 1.0 2.0 3.0"
    (folder / f"{tool}-{size}.txt").write_text(f"junk\n #bytes #iterations ...\n {row}\n")


def floor(folder, size, steady, first, setup):
    """An rpc_floor client output."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"rpc_floor-{size}.txt").write_text(
        "#bytes connect_us register_us mrsp_us setup_us first_us steady_us steady_min_us\n"
        f"{size} 5000.0 100.0 200.0 {setup} {first} {steady} 1.0\n"
    )


class BestOfThePerftestRounds(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = Path(self.tmp.name)
        # Perftest round 0 in its slow mode, round 1 in its fast one.
        for rnd, lat, send, bw in ((0, 40.0, 45.0, 1.0), (1, 15.0, 17.0, 2.0)):
            d = self.out / "perftest" / str(rnd)
            perftest(d, "ib_write_lat", 64, typical=lat)
            perftest(d, "ib_send_lat", 64, typical=send)
            perftest(d, "ib_write_bw", 64, bw=bw)
        rpc = self.out / "rpc" / "1"
        rpc.mkdir(parents=True)
        (rpc / "summary.txt").write_text("# comment\n" + HEADER + "64,60.0,180.0,450.0,80.0,81.0\n")

    def tearDown(self):
        self.tmp.cleanup()

    def test_ratios_use_the_faster_perftest_round(self):
        text, _complete = bench_report.report(self.out)
        row = next(line for line in text.splitlines() if line.strip().startswith("64 |"))
        cells = [c.split() for c in row.split("|")]
        self.assertEqual(cells[1][0], "30.0")  # 2 * min(40, 15), not 2 * mean = 55
        # 60/30, 180/30, and (2 * 64 B / 60 us) / max(1, 2) MiB/s (the mean would give 1.36).
        self.assertEqual(cells[3], ["2.00", "6.00", "1.02"])
        self.assertEqual(cells[4], ["1.76"])  # 60 / (2 * 17)

    def test_the_cpu_note_says_where_the_naa_ran(self):
        text, _complete = bench_report.report(self.out)
        self.assertIn("of the NAA, in naaice-bench's process;", text)
        (self.out / "rpc" / "1" / "summary.txt").write_text(
            "# cpu = ...: client = the calling thread, others = the NAA's process 42 (all its threads)\n"
            + HEADER + "64,60.0,180.0,450.0,80.0,81.0\n"
        )
        text, _complete = bench_report.report(self.out)
        self.assertIn("of the NAA, in its own process;", text)

    def test_the_floor_uses_its_faster_round_and_is_compared_both_ways(self):
        floor(self.out / "perftest" / "0", 64, steady=50.0, first=200.0, setup=600.0)
        floor(self.out / "perftest" / "1", 64, steady=40.0, first=90.0, setup=300.0)
        text, _complete = bench_report.report(self.out)
        self.assertTrue(text.startswith(f"Soft-RoCE benchmark: {self.out}\n"), text)
        row = next(line for line in text.splitlines() if line.strip().startswith("64 |") and
                   len(line.split("|")) == 3)
        cells = [c.split() for c in row.split("|")]
        # The floor against 2*lat = 30: 40/30, 90/30, 300/30, (2 * 64 B / 40 us) / 2 MiB/s;
        # the RPC against the floor: 60/40, 180/90, 450/300.
        self.assertEqual(cells[1], ["1.33", "3.00", "10.00", "1.53"])
        self.assertEqual(cells[2], ["1.50", "2.00", "1.50"])
        self.assertIn("MISSED); the bare-verbs floor: 1.33x", text)
        self.assertIn("the bare-verbs floor: 10.00x)", text)

    def test_a_malformed_floor_file_is_an_error(self):
        d = self.out / "perftest" / "1"
        (d / "rpc_floor-64.txt").write_text("rpc_floor: rdma_connect failed\n")
        with self.assertRaises(bench_report.ReportError):
            bench_report.report(self.out)
        (d / "rpc_floor-64.txt").write_text("#bytes connect_us\n64 5000.0\n")
        with self.assertRaises(bench_report.ReportError):
            bench_report.report(self.out)

    def test_no_floor_no_floor_lines(self):
        text, _complete = bench_report.report(self.out)
        self.assertNotIn("floor", text)

    def test_a_missing_rpc_round_is_an_error(self):
        (self.out / "rpc" / "1" / "summary.txt").unlink()
        with self.assertRaises(bench_report.ReportError):
            bench_report.report(self.out)


if __name__ == "__main__":
    unittest.main()
