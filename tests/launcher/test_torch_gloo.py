"""A real PyTorch program (init_process_group('gloo') from the environment) under lf-train launch."""
import os, re

import pytest

from harness import Agent, PY, free_port

PROG = os.path.join(os.path.dirname(__file__), "progs", "gloo_allreduce.py")


def test_gloo_all_reduce_two_nodes_two_workers(tmp_path):
    pytest.importorskip("torch", reason="needs torch (scripts/install_deps.sh --python)")
    port = free_port()
    args = ["launch", "--nnodes", "2", "--nproc-per-node", "2", "--master-port", str(port), "--join-timeout", "60"]
    n0 = Agent(args + ["--node-rank", "0", "--", PY, PROG], tmp=str(tmp_path))
    n1 = Agent(args + ["--node-rank", "1", "--", PY, PROG], tmp=str(tmp_path))
    try:
        assert n0.wait(120) == 0, n0.err
        assert n1.wait(120) == 0, n1.err
        results = re.findall(r"\[rank (\d)\] ALLREDUCE rank=(\d) world=(\d) local=(\d) sum=(\d+)", n0.out + n1.out)
        assert sorted(int(r[0]) for r in results) == [0, 1, 2, 3]
        for prefix_rank, rank, world, local, total in results:
            assert prefix_rank == rank and world == "4" and int(local) == int(rank) % 2
            assert total == "10"  # 1 + 2 + 3 + 4
    finally:
        n0.cleanup()
        n1.cleanup()
