"""A whole program for ``paprof run --cmd``: a few steps of a row softmax in PyTorch,
each inside the NVTX range ``softmax_step`` (the first step, which loads the kernels,
runs before any range and is not profiled).

    paprof run --cmd "python3 whole_program.py --steps 3" --nvtx-range softmax_step --name whole_program

paprof cannot verify a program it only runs: the run is stored as "not verified".
"""

import argparse

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--cols", type=int, default=4096)
    args = parser.parse_args()
    x = torch.randn(args.rows, args.cols, device="cuda")
    torch.softmax(x, dim=-1)  # warm-up, outside the range
    torch.cuda.synchronize()
    for _ in range(args.steps):
        torch.cuda.nvtx.range_push("softmax_step")
        torch.softmax(x, dim=-1)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()


if __name__ == "__main__":
    main()
