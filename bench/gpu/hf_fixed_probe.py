"""Where the static-cache, graph-replayed decoder of `reallib.py hf-generate-fixed` fails:
runs it for N new tokens (argv[1]) in this process, with or without the CUDA graph
(argv[2]: graph or eager), so a failure's Python traceback shows which index_copy_ it is.

    CUDA_LAUNCH_BLOCKING=1 python3 bench/gpu/hf_fixed_probe.py 1000 eager
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import reallib  # noqa: E402

n, how = int(sys.argv[1]), sys.argv[2]
reallib.STEPS["generate"] = (n, n, 8)
if how == "eager":
    import torch

    class NoGraph:
        """Stands in for torch.cuda.CUDAGraph: capture runs the step eagerly, replay reruns it."""

        def __init__(self):
            self.step = None

        def replay(self):
            self.step()

    def run_eagerly(graph, **_):
        import contextlib
        import inspect

        frame = inspect.currentframe().f_back
        graph.step = torch.no_grad()(frame.f_locals["decode"])
        return contextlib.nullcontext()

    torch.cuda.CUDAGraph = NoGraph
    torch.cuda.graph = run_eagerly
sys.argv = ["reallib.py", "hf-generate-fixed", "--form", "long"]
reallib.main()
print(f"probe ok: {n} tokens, {how}")
