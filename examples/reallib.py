"""Loops written with real libraries the way their users write them (JAX, transformers,
PyTorch Lightning, CuPy, torch DataLoader workers, torchvision augmentation), each with the
change a user would make to fix it: the same work (steps, samples, tokens) done faster.
Like examples/staged.py, each prints `loop_s`, `step_s`, `second_half_s` (the loop's second
half: its steady state) and `cuda_s` (examples/timing.py); a pair whose two runs must
compute the same thing prints the same `result` line (bench/gpu/reallib.sh compares them).

    python3 examples/reallib.py MODE [--form short|long] [--device cuda|cpu]

`short` is a loop of about 1-3 s on an H200 after the imports and the set-up, `long` one of
5-10 s (the fixed modes run the same steps, so theirs are shorter). `--device cpu` runs the
modes that can run without a GPU at tiny sizes, as a smoke test of the code: CuPy's modes
then run on NumPy, the CUDA-only fixes (graphs, pinned memory) in their plain form.

Modes, the first finding each should get, and the fix (bench/gpu/reallib.sh checks them).
Where no rule of today's `gpuspy explain` fits, the finding is the one issue 36 asks for:
per-op dispatch overhead is `launch-bound` (the compute layer, with the framework's fix).
    jax-nojit          ~20 elementwise jnp ops a step on 4,096 floats, eager -> launch-bound   (jax-jit: the step under jax.jit)
    hf-generate        transformers generate(), batch 1, a 4-layer random Llama -> launch-bound (hf-generate-fixed: static KV
                       cache and a CUDA-graph-captured decode step; the same tokens)
    lightning-fit      Trainer.fit of a wide MLP, 2,048-row batches collated   -> input-starved  (lightning-fit-fixed: the dataset
                       row by row in the main process; fit() ends by moving                     on the GPU, each batch gathered
                       the model back to the host                                               by one index list)
    cupy-elementwise   ~20 CuPy elementwise ops a step on 4,096 floats        -> launch-bound   (cupy-fused: cupy.fuse of the step)
    loader-slow        8 DataLoader workers decoding and augmenting JPEGs     -> input-starved  (loader-fast: batches built once,
                       for a bf16 ResNet-50 training step                                        kept on the GPU)
    augment-main       torchvision RandomResizedCrop/flip/ColorJitter on PIL  -> input-starved  (augment-gpu: transforms.v2 on
                       images in the main process, for a ResNet-18 step                         the batch on the GPU)
    item-logging       a bf16 MLP step (~2 ms on the GPU); loss.item() every  -> sync-stalled   (item-logging-fixed: every 50 steps)
                       step, then ~1 ms formatting a record of smoothed stats
    cupy-asnumpy       cupy.asnumpy of scores every step, argsort with NumPy  -> sync-stalled   (cupy-on-device: cupy.argsort)
    numpy-pageable     a NumPy dataset, torch.from_numpy(x).cuda() per batch  -> pageable-memcpy (numpy-pinned: the dataset
                                                                                                pinned once, non_blocking copies)
    adam-foreach-off   Adam(foreach=False) over 400 small parameter tensors   -> launch-bound   (adam-fused: Adam(fused=True))
    jax-numpy-sync     a jitted JAX training step, float(loss) and a log      -> sync-stalled   (jax-on-device: every 50 steps)
                       record every step
    healthy-graph-infer a CUDA-graph-captured bf16 ResNet-50 forward, replayed -> no warning
    healthy-loader     8 workers, cheap items, pinned, non_blocking, ResNet-50 -> no warning
    healthy-checkpoint a 25M-parameter MLP trained, torch.save every quarter  -> no warning (the checkpoints are phases)

HELD-OUT (a third of the problem and healthy modes, chosen before any calibration: the
analysis must not be tuned on them; bench/gpu/reallib_table.py reports them apart):
    augment-main, cupy-asnumpy, adam-foreach-off, jax-numpy-sync, healthy-loader

No mode downloads anything: models are built from configs with random weights, data is
synthetic, HF_HUB_OFFLINE=1. CuPy's and JAX's modes import no torch (torch's import loads
libcupti; theirs must be found by gpuspy itself).
"""
import argparse
import functools
import hashlib
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from timing import LoopTimer

# Steps per form: (short, long, cpu smoke test). The short loops are sized for about 1.5 s
# of the problem mode on an H200, the long ones for about 5 s.
STEPS = {
    "jax-elementwise": (600, 2_500, 5),
    "generate": (300, 1_000, 8),
    "lightning": (40, 130, 6),
    "cupy-elementwise": (6_000, 20_000, 5),
    "loader": (30, 100, 3),
    "augment": (20, 65, 3),
    "item-logging": (800, 2_500, 6),
    "cupy-asnumpy": (200, 750, 4),
    "numpy-copies": (300, 1_000, 4),
    "adam": (60, 200, 3),
    "jax-train": (3_000, 11_000, 6),
    "graph-infer": (250, 850, 3),
    "healthy-loader": (70, 230, 3),
    "checkpoint": (400, 1_600, 8),
}
FORM = {"short": 0, "long": 1}

# Set by --device: "cuda", or "cpu" for a smoke test at tiny sizes.
DEVICE = "cuda"


def small():
    return DEVICE == "cpu"


def no_sync():
    pass


# Every mode's loop is timed by it; a mode whose framework is not torch sets its `sync`.
TIMER = LoopTimer(no_sync)


# ---- shared pieces ------------------------------------------------------------------


def elementwise_step(xp, x, y):
    """About 20 elementwise ops on a small array (NumPy, CuPy or jax.numpy): five rounds of
    a scaled, shifted tanh. One kernel each unless fused."""
    for _ in range(5):
        x = xp.tanh(x * 1.01 + y * 0.1)
    return x


def log_record(log, step, loss, window, t0):
    """What a training script writes per logged step: a moving average kept in Python, a
    record with the time, serialised to a JSON line."""
    window.append(loss)
    del window[:-100]
    record = {
        "step": step,
        "loss": round(loss, 6),
        "loss_avg100": sum(window) / len(window),
        "elapsed_s": round(time.perf_counter() - t0, 4),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "lr": 3e-4,
    }
    log.write(json.dumps(record) + "\n")


def tokens_result(tokens):
    """The `result` line of a pair that must produce the same tokens."""
    digest = hashlib.sha1(bytes(str(list(tokens)), "ascii")).hexdigest()[:16]
    print(f"result tokens {len(tokens)} sha1 {digest}")


def torch_setup():
    """What a torch training script sets first: seeds, cuDNN autotuning, TF32 matmuls."""
    import torch

    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    torch.set_float32_matmul_precision("high")
    TIMER.sync = torch.cuda.synchronize if DEVICE == "cuda" else no_sync
    return torch


def cupy_or_numpy():
    """CuPy on the GPU; NumPy for the CPU smoke test."""
    if small():
        import numpy

        TIMER.sync = no_sync
        return numpy
    import cupy

    TIMER.sync = cupy.cuda.Device().synchronize
    return cupy


def jax_setup():
    import jax

    if small():
        jax.config.update("jax_platforms", "cpu")
    return jax


def block_on(holder):
    """A JAX loop's sync: JAX has no device-wide one, so block on the loop's latest state."""
    import jax

    def sync():
        jax.block_until_ready(holder["x"])

    return sync


def autocast(torch):
    return torch.autocast(device_type=DEVICE, dtype=torch.bfloat16)


def resnet_step(torch, model, opt):
    """One bf16 training step of a torchvision classifier, as in the references' train.py."""
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(x, y):
        with autocast(torch):
            loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return step


def resnet(torch, arch, classes=1000):
    import torchvision

    model = getattr(torchvision.models, arch)(weights=None, num_classes=classes)
    model = model.to(DEVICE, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    return model, opt


def synthetic_image(rng, w, h):
    """A photo-like RGB image: smooth colour gradients plus noise, so JPEG has real work."""
    import numpy

    yy, xx = numpy.mgrid[0:h, 0:w].astype(numpy.float32)
    phase = rng.uniform(0, 6.28, 3)
    channels = [127 + 100 * numpy.sin(xx / (23 + 7 * c) + yy / (31 + 5 * c) + phase[c]) for c in range(3)]
    img = numpy.stack(channels, -1) + rng.normal(0, 12, (h, w, 3))
    return numpy.clip(img, 0, 255).astype(numpy.uint8)


IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


# ---- JAX ----------------------------------------------------------------------------


def jax_elementwise(jit):
    jax = jax_setup()
    import jax.numpy as jnp
    import numpy

    kx, ky = jax.random.split(jax.random.PRNGKey(0))
    x0 = jax.random.normal(kx, (4096,))
    y = jax.random.normal(ky, (4096,))
    eager = functools.partial(elementwise_step, jnp)
    jitted = jax.jit(eager)
    # Both compute the same step (XLA may contract ops, so not to the last bit).
    numpy.testing.assert_allclose(numpy.asarray(eager(x0, y)), numpy.asarray(jitted(x0, y)), rtol=1e-5, atol=1e-6)
    step = jitted if jit else eager
    holder = {"x": x0}
    TIMER.sync = block_on(holder)

    def loop(n):
        x = x0
        for _ in TIMER.steps(n):
            x = step(x, y)
            holder["x"] = x
        print(f"metric {float(jnp.sum(x)):.4f}")

    loop(3)  # warm-up: eager JAX compiles each op on its first call, jit the whole step
    return loop


def jax_train(log_every):
    # A jitted MLP training step (about 0.3 ms on an H200) and a log record. Reading the
    # loss with float() blocks until the step is done, and the host then formats the
    # record while the GPU waits for the next step.
    jax = jax_setup()
    import jax.numpy as jnp

    d, hidden, batch = (64, 128, 32) if small() else (1024, 4096, 512)
    k1, k2, k3, k4 = jax.random.split(jax.random.PRNGKey(0), 4)
    params = {
        "w1": jax.random.normal(k1, (d, hidden)) / d**0.5,
        "w2": jax.random.normal(k2, (hidden, d)) / hidden**0.5,
    }
    x = jax.random.normal(k3, (batch, d))
    target = jax.random.normal(k4, (batch, d))

    def loss_fn(p, x, t):
        return jnp.mean((jax.nn.gelu(x @ p["w1"]) @ p["w2"] - t) ** 2)

    @jax.jit
    def train_step(p, x, t):
        loss, grads = jax.value_and_grad(loss_fn)(p, x, t)
        return jax.tree_util.tree_map(lambda a, g: a - 1e-3 * g, p, grads), loss

    holder = {"x": params}
    TIMER.sync = block_on(holder)
    log = io.StringIO()

    def loop(n):
        nonlocal params
        window, t0 = [], time.perf_counter()
        for i in TIMER.steps(n):
            params, loss = train_step(params, x, target)
            holder["x"] = params
            if i % log_every == 0:
                log_record(log, i, float(loss), window, t0)
        print(f"metric {float(loss):.6f}")

    loop(3)  # warm-up: the compile, and the first conversion and log record
    return loop


# ---- CuPy ---------------------------------------------------------------------------


def cupy_elementwise(fused):
    import numpy

    xp = cupy_or_numpy()
    rng = numpy.random.default_rng(0)
    x0 = xp.asarray(rng.standard_normal(4096, dtype=numpy.float32))
    y = xp.asarray(rng.standard_normal(4096, dtype=numpy.float32))

    def eager(x, y):
        return elementwise_step(xp, x, y)

    one_kernel = eager if small() else xp.fuse(eager)
    # The fused kernel computes the same step (compiled here, before the loop).
    numpy.testing.assert_allclose(to_host(xp, eager(x0, y)), to_host(xp, one_kernel(x0, y)), rtol=1e-5, atol=1e-6)
    step = one_kernel if fused else eager

    def loop(n):
        x = x0
        for _ in TIMER.steps(n):
            x = step(x, y)
        print(f"metric {float(x.sum()):.4f}")

    loop(3)
    return loop


def to_host(xp, a):
    return xp.asnumpy(a) if hasattr(xp, "asnumpy") else a


def cupy_asnumpy(on_device):
    # A matmul step (about 2.7 ms of fp32 on an H200) whose 65,536 scores pick the 4,096
    # entries to damp. The problem sorts them on the host; the fix with cupy.argsort. Both
    # sort stably, so they pick the same entries and compute the same result.
    import numpy

    xp = cupy_or_numpy()
    n = 128 if small() else 4096
    rng = numpy.random.default_rng(0)
    a = xp.asarray(rng.standard_normal((n, n), dtype=numpy.float32)) * (2 / n**0.5)
    b0 = xp.asarray(rng.standard_normal((n, n), dtype=numpy.float32))

    def step(b):
        c = a @ b
        scores = c[:, :16].ravel()  # the top n of 16 n scores are kept
        if on_device:
            keep = xp.argsort(scores, kind="stable")[-n:]
        else:
            keep = xp.asarray(numpy.argsort(to_host(xp, scores), kind="stable")[-n:])
        b = xp.tanh(c)
        flat = b.ravel()
        flat[keep] *= 0.5
        return b

    def loop(n_steps):
        b = b0
        for _ in TIMER.steps(n_steps):
            b = step(b)
        print(f"result sum {float(b.sum()):.9e}")

    step(b0)  # warm-up: cuBLAS and the kernels' first compile
    return loop


# ---- transformers -------------------------------------------------------------------


def hf_llama(torch):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=32000,
        hidden_size=64 if small() else 256,
        intermediate_size=128 if small() else 704,
        num_hidden_layers=2 if small() else 4,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=4096,
        attn_implementation="sdpa",
    )
    model = LlamaForCausalLM(config).to(DEVICE).eval()
    # Random weights: no end-of-sequence token, so every run makes all its tokens.
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def halfway_criterion(torch, prompt_len, new_tokens):
    """A generate() stopping criterion that never stops: it marks the loop's second half
    when half the new tokens are out. It returns one preallocated tensor, so it adds no
    GPU work and no sync to a step."""
    from transformers import StoppingCriteria

    class Halfway(StoppingCriteria):
        def __init__(self):
            self.never = torch.zeros(1, dtype=torch.bool, device=DEVICE)

        def __call__(self, input_ids, scores, **kwargs):
            if input_ids.shape[1] == prompt_len + new_tokens // 2:
                TIMER.half()
            return self.never

    return Halfway()


def hf_generate(graphed):
    torch = torch_setup()
    from transformers import StoppingCriteriaList
    model = hf_llama(torch)
    prompt_len = 16
    prompt = torch.randint(2, 32000, (1, prompt_len), generator=torch.Generator().manual_seed(0)).to(DEVICE)

    def generate(new_tokens, halfway=None):
        with torch.no_grad():
            out = model.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                max_new_tokens=new_tokens,
                do_sample=False,
                stopping_criteria=StoppingCriteriaList([halfway] if halfway else []),
            )
        return out[0, prompt_len:].tolist()

    if not graphed:
        generate(8)  # warm-up

        def loop(n):
            tokens_result(generate(n, halfway_criterion(torch, prompt_len, n)))

        return loop
    return graphed_decoder(torch, model, prompt, generate)


def graphed_decoder(torch, model, prompt, generate):
    """The fix: a static KV cache sized for the whole generation and the one-token decode
    step captured once in a CUDA graph (its argmax, cache writes, mask and position updates
    included), then replayed once a token: no Python, module or logits-processor work per
    token. The prompt is still run eagerly."""
    from transformers import StaticCache

    prompt_len = prompt.shape[1]
    capacity = prompt_len + max(STEPS["generate"])
    neg = torch.finfo(torch.float32).min
    cache = StaticCache(config=model.config, max_cache_len=capacity)
    # The masks are given in 4D, which transformers uses as they are: the prompt's is
    # causal; the decode step's opens one more slot of the cache a token.
    prefill_mask = torch.full((1, 1, prompt_len, capacity), neg, device=DEVICE)
    prefill_mask[0, 0, :, :prompt_len] = torch.triu(torch.full((prompt_len, prompt_len), neg, device=DEVICE), 1)
    decode_mask = torch.full((1, 1, 1, capacity), neg, device=DEVICE)
    token = torch.zeros((1, 1), dtype=torch.long, device=DEVICE)
    pos = torch.zeros(1, dtype=torch.long, device=DEVICE)
    out = torch.zeros(capacity, dtype=torch.long, device=DEVICE)

    def prefill():
        # The cache's layers count the positions they have written themselves (on the
        # GPU, whatever cache_position says): start every sequence from an empty cache.
        cache.reset()
        decode_mask.fill_(neg)
        decode_mask[..., :prompt_len] = 0
        positions = torch.arange(prompt_len, device=DEVICE)
        logits = model(
            prompt, attention_mask=prefill_mask, past_key_values=cache, cache_position=positions,
            position_ids=positions.unsqueeze(0), use_cache=True,
        ).logits
        first = logits[:, -1].argmax(-1)
        out[0] = first[0]
        token.copy_(first.view(1, 1))
        pos.fill_(prompt_len)

    def decode():
        decode_mask.index_fill_(3, pos, 0.0)
        logits = model(
            token, attention_mask=decode_mask, past_key_values=cache, cache_position=pos,
            position_ids=pos.view(1, 1), use_cache=True,
        ).logits
        nxt = logits[:, -1].argmax(-1)
        out.index_copy_(0, pos - (prompt_len - 1), nxt)  # the token after out[pos - prompt_len]
        token.copy_(nxt.view(1, 1))
        pos.add_(1)

    def eager_tokens(n):
        with torch.no_grad():
            prefill()
            for _ in range(n - 1):
                decode()
        return out[:n].tolist()

    # The static-cache decoder must make generate()'s tokens; if transformers changed how
    # it uses the cache or a 4D mask, say so here rather than time something else.
    want = generate(8)
    got = eager_tokens(8)
    if got != want:
        sys.exit(f"hf-generate-fixed: the static-cache decoder made {got}, generate() {want}")
    if DEVICE == "cuda":
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():
            eager_tokens(4)  # warm-up on a side stream, as torch.cuda.graphs asks
        torch.cuda.current_stream().wait_stream(side)
        with torch.no_grad():
            prefill()
            with torch.cuda.graph(graph):
                decode()
        run = graph.replay
    else:
        run = torch.no_grad()(decode)

    def loop(n):
        with torch.no_grad():
            prefill()
        for _ in TIMER.steps(n - 1):
            run()
        tokens_result(out[:n].tolist())

    return loop


# ---- PyTorch Lightning --------------------------------------------------------------


def lightning_fit(on_gpu):
    # Trainer.fit of a wide MLP (84M parameters) on pinned batches from a TensorDataset on
    # the host. The DataLoader collates each 2,048-row batch in the main process, row by
    # row: steps of 29-41 ms on an H200 with the GPU idle 62-77 % of them (reallib rounds 3
    # and 4), as Lightning itself warns ("does not have many workers"). The fix keeps the
    # dataset on the GPU and gathers each batch with one index list (a BatchSampler as the sampler, no
    # collation): the same steps, batch size and samples. When fit() returns, Lightning
    # has moved the model back to the host: a one-off copy, not the steady state.
    torch = torch_setup()
    import lightning as L

    d, hidden, batch, samples = (32, 64, 16, 64) if small() else (1024, 8192, 2048, 16384)

    class WideMLP(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(
                torch.nn.Linear(d, hidden), torch.nn.GELU(),
                torch.nn.Linear(hidden, hidden), torch.nn.GELU(),
                torch.nn.Linear(hidden, d),
            )

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    class StepTimer(L.Callback):
        """Times the training steps alone: set-up before them and teardown after are not
        the loop."""

        def __init__(self, steps):
            self.steps = steps
            self.seen = 0

        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            if self.seen == 0:
                TIMER.start()
            elif self.seen == self.steps // 2:
                TIMER.half()

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            self.seen += 1
            if self.seen == self.steps:
                TIMER.stop(self.steps, CUDA_T0)

    g = torch.Generator().manual_seed(0)
    tensors = (torch.randn(samples, d, generator=g), torch.randn(samples, d, generator=g))
    data = torch.utils.data.TensorDataset(*(t.to(DEVICE) for t in tensors) if on_gpu else tensors)

    def make_loader():
        if on_gpu:
            # Each sampled index list reaches the dataset whole: one gather per tensor.
            batches = torch.utils.data.BatchSampler(torch.utils.data.RandomSampler(data), batch, drop_last=False)
            return torch.utils.data.DataLoader(data, sampler=batches, batch_size=None)
        return torch.utils.data.DataLoader(data, batch_size=batch, shuffle=True, pin_memory=DEVICE == "cuda")

    def loop(n):
        loader = make_loader()
        trainer = L.Trainer(
            accelerator="gpu" if DEVICE == "cuda" else "cpu", devices=1, max_steps=n, max_epochs=-1,
            logger=False, enable_checkpointing=False, enable_progress_bar=False,
            enable_model_summary=False, callbacks=[StepTimer(n)],
        )
        trainer.fit(WideMLP(), loader)

    return loop


# ---- DataLoader workers and augmentation --------------------------------------------


def jpeg_loader(torch, batch, workers):
    """An ImageNet-style pipeline: 800x600 JPEGs decoded by PIL, RandomResizedCrop(224),
    flip, ToTensor, Normalize, in `workers` DataLoader processes."""
    import numpy
    from PIL import Image
    from torchvision import transforms as T

    side = 64 if small() else 224
    transform = T.Compose([
        T.RandomResizedCrop(side), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(IMAGENET_MEAN, IMAGENET_STD),
    ])
    rng = numpy.random.default_rng(0)
    w, h = (160, 120) if small() else (800, 600)
    jpegs = []
    for _ in range(16):
        f = io.BytesIO()
        Image.fromarray(synthetic_image(rng, w, h)).save(f, format="JPEG", quality=90)
        jpegs.append(f.getvalue())

    class Jpegs(torch.utils.data.Dataset):
        def __init__(self, count):
            self.count = count

        def __len__(self):
            return self.count

        def __getitem__(self, i):
            img = Image.open(io.BytesIO(jpegs[i % len(jpegs)])).convert("RGB")
            return transform(img), i % 1000

    def make(count):
        return torch.utils.data.DataLoader(
            Jpegs(count), batch_size=batch, shuffle=True, num_workers=workers, pin_memory=DEVICE == "cuda",
            drop_last=True, generator=torch.Generator().manual_seed(0),
        )

    return make


def loader(prebuilt):
    # A bf16 ResNet-50 step (about 22 ms at batch 64 on an H200) fed by 8 workers that need
    # about twice that per batch. The fix runs the same steps on batches built once, on
    # the GPU. The workers start in the loop, as in any script's first epoch.
    torch = torch_setup()
    batch = 4 if small() else 64
    model, opt = resnet(torch, "resnet18" if small() else "resnet50")
    step = resnet_step(torch, model, opt)
    make_loader = jpeg_loader(torch, batch, 2 if small() else 8)

    def to_gpu(x, y):
        return x.to(DEVICE, non_blocking=True, memory_format=torch.channels_last), y.to(DEVICE, non_blocking=True)

    side = 64 if small() else 224
    warm = torch.randn(batch, 3, side, side, device=DEVICE).contiguous(memory_format=torch.channels_last)
    for _ in range(3):  # cuDNN autotuning, outside the loop
        step(warm, torch.zeros(batch, dtype=torch.long, device=DEVICE))
    if prebuilt:
        batches = [to_gpu(x, y) for x, y in make_loader(4 * batch)]

        def loop(n):
            for i in TIMER.steps(n):
                loss = step(*batches[i % len(batches)])
            print(f"metric {loss.item():.4f}")

        return loop

    def loop(n):
        batches = iter(make_loader(n * batch))
        for _, (x, y) in zip(TIMER.steps(n), batches):
            loss = step(*to_gpu(x, y))
        print(f"metric {loss.item():.4f}")
        TAIL.append(batches)  # the workers shut down after the loop's timing, not in it

    return loop


def augment(on_gpu):
    # RandomResizedCrop, flip and ColorJitter for a ResNet-18 step, per image on PIL images
    # in the main process, or (the fix) with torchvision.transforms.v2 on the batch on the
    # GPU: the same images, transforms and steps (v2 draws one set of parameters a batch).
    torch = torch_setup()
    import numpy
    from PIL import Image
    from torchvision import transforms as T
    from torchvision.transforms import v2

    batch, side, pool_size = (4, 64, 8) if small() else (32, 224, 256)
    src = 80 if small() else 256
    rng = numpy.random.default_rng(0)
    images = [synthetic_image(rng, src, src) for _ in range(pool_size)]
    model, opt = resnet(torch, "resnet18", classes=100)
    step = resnet_step(torch, model, opt)
    mean = torch.tensor(IMAGENET_MEAN, device=DEVICE).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, device=DEVICE).view(1, 3, 1, 1)
    labels = torch.randint(0, 100, (batch,), device=DEVICE)

    def normalise(u8):
        x = u8.float().div_(255).sub_(mean).div_(std)
        return x.contiguous(memory_format=torch.channels_last)

    jitter = (0.4, 0.4, 0.4)
    if on_gpu:
        pool = torch.from_numpy(numpy.stack(images)).permute(0, 3, 1, 2).contiguous().to(DEVICE)
        transform = v2.Compose([v2.RandomResizedCrop(side, antialias=True), v2.RandomHorizontalFlip(), v2.ColorJitter(*jitter)])

        def next_batch(i):
            idx = torch.arange(i * batch, (i + 1) * batch, device=DEVICE) % pool_size
            return normalise(transform(pool[idx]))
    else:
        pil = [Image.fromarray(img) for img in images]
        transform = T.Compose([T.RandomResizedCrop(side), T.RandomHorizontalFlip(), T.ColorJitter(*jitter), T.PILToTensor()])

        def next_batch(i):
            u8 = torch.stack([transform(pil[j % pool_size]) for j in range(i * batch, (i + 1) * batch)])
            return normalise(u8.to(DEVICE))

    for i in range(3):  # cuDNN autotuning
        step(next_batch(i), labels)

    def loop(n):
        for i in TIMER.steps(n):
            loss = step(next_batch(i), labels)
        print(f"metric {loss.item():.4f}")

    return loop


def healthy_loader():
    # A DataLoader that keeps up: 8 workers slicing pre-decoded uint8 images (cheap items),
    # pinned batches, non_blocking copies, normalised on the GPU, for a ResNet-50 step.
    torch = torch_setup()
    batch, side, pool_size = (4, 64, 8) if small() else (64, 224, 512)
    g = torch.Generator().manual_seed(0)
    pool = torch.randint(0, 256, (pool_size, 3, side, side), dtype=torch.uint8, generator=g)
    model, opt = resnet(torch, "resnet18" if small() else "resnet50")
    step = resnet_step(torch, model, opt)
    mean = torch.tensor(IMAGENET_MEAN, device=DEVICE).view(1, 3, 1, 1) * 255
    std = torch.tensor(IMAGENET_STD, device=DEVICE).view(1, 3, 1, 1) * 255

    class Slices(torch.utils.data.Dataset):
        def __init__(self, count):
            self.count = count

        def __len__(self):
            return self.count

        def __getitem__(self, i):
            img = pool[i % pool_size]
            return (img.flip(-1) if i % 2 else img), i % 1000

    steps = max(STEPS["healthy-loader"])
    data = torch.utils.data.DataLoader(
        Slices((steps + 4) * batch), batch_size=batch, shuffle=True, num_workers=2 if small() else 8,
        pin_memory=DEVICE == "cuda", persistent_workers=True, prefetch_factor=4, drop_last=True, generator=g,
    )

    def to_gpu(x, y):
        x = x.to(DEVICE, non_blocking=True).float().sub_(mean).div_(std)
        return x.contiguous(memory_format=torch.channels_last), y.to(DEVICE, non_blocking=True)

    batches = iter(data)
    for _ in range(3):  # workers started, cuDNN autotuned
        step(*to_gpu(*next(batches)))

    def loop(n):
        for _, (x, y) in zip(TIMER.steps(n), batches):
            loss = step(*to_gpu(x, y))
        print(f"metric {loss.item():.4f}")

    return loop


# ---- torch training loops -----------------------------------------------------------


def stats_record(log, step, loss, window, t0):
    """What a training script with smoothed metrics writes per logged step: the loss, its
    mean, spread, median and deciles over the last 500 logged values (Python's
    `statistics`, exact and slow: about 1 ms of host time once the window is full), the
    time, as an indented JSON record."""
    window.append(loss)
    del window[:-500]
    record = {
        "step": step,
        "loss": round(loss, 6),
        "loss_mean": statistics.fmean(window),
        "loss_std": statistics.pstdev(window),
        "loss_median": statistics.median(window),
        "loss_deciles": [round(q, 6) for q in statistics.quantiles(window, n=10)] if len(window) > 1 else [],
        "elapsed_s": round(time.perf_counter() - t0, 4),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "lr": 3e-4,
    }
    log.write(json.dumps(record, indent=2, sort_keys=True) + "\n")


def item_logging(log_every):
    # A bf16 MLP (4 layers of 4096x4096, batch 2048) trained with fused AdamW, sized for
    # about 2 ms of GPU work a step on an H200 against some 60 launches, so the host runs
    # ahead of the GPU. Every `log_every` steps the loss is read with .item() (the host
    # waits for the step) and a record of smoothed statistics is formatted (about 1 ms of
    # host work) while the GPU, drained by the sync, has nothing queued. Logging every 50
    # steps takes the sync and the formatting out of 49 steps in 50.
    torch = torch_setup()
    d, layers, batch = (64, 2, 32) if small() else (4096, 4, 2048)
    model = torch.nn.Sequential(*[m for _ in range(layers) for m in (torch.nn.Linear(d, d), torch.nn.GELU())]).to(DEVICE)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=DEVICE == "cuda")
    g = torch.Generator(device=DEVICE).manual_seed(0)
    data = torch.randn(8, batch, d, device=DEVICE, generator=g)
    target = torch.randn(8, batch, d, device=DEVICE, generator=g)
    log = io.StringIO()

    def step(i):
        with autocast(torch):
            loss = torch.nn.functional.mse_loss(model(data[i % len(data)]).float(), target[i % len(target)])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    def loop(n):
        window, t0 = [], time.perf_counter()
        for i in TIMER.steps(n):
            loss = step(i)
            if i % log_every == 0:
                stats_record(log, i, loss.item(), window, t0)
        print(f"metric {loss.item():.4f}")

    for i in range(3):
        step(i)
    return loop


def numpy_copies(pinned):
    # A dataset held in host memory as a NumPy array (normalised float32 images, 32x3x224x224,
    # 19 MB a batch), each batch copied to the GPU for a small CNN step:
    # torch.from_numpy(x).cuda() copies from pageable memory, and the host waits for the copy.
    # The fix pins the dataset once at start (what DataLoader(pin_memory=True) does per batch
    # in its pinning thread) and copies with non_blocking=True, so the copy of the next batch
    # overlaps the step.
    torch = torch_setup()
    import numpy

    batch, side = (4, 32) if small() else (32, 224)
    rng = numpy.random.default_rng(0)
    host = rng.standard_normal((8, batch, 3, side, side), dtype=numpy.float32)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(64, 128, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(128, 256, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(256, 10),
    ).to(DEVICE, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    labels = torch.randint(0, 10, (batch,), device=DEVICE)
    pin = pinned and DEVICE == "cuda"
    dataset = torch.from_numpy(host)
    if pin:
        dataset = dataset.pin_memory()

    def batch_on_gpu(i):
        return dataset[i % len(dataset)].to(DEVICE, non_blocking=pin)

    def step(x):
        with autocast(torch):
            loss = torch.nn.functional.cross_entropy(model(x.contiguous(memory_format=torch.channels_last)), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    for i in range(3):
        step(batch_on_gpu(i))

    def loop(n):
        for i in TIMER.steps(n):
            loss = step(batch_on_gpu(i))
        print(f"metric {loss.item():.4f}")

    return loop


def adam(fused):
    # A deep narrow network (100 blocks of Linear(256, 256) and LayerNorm: 400 parameter
    # tensors). Adam(foreach=False) updates them one by one, several kernels each.
    torch = torch_setup()
    blocks, d, batch = (4, 32, 8) if small() else (100, 256, 256)
    model = torch.nn.Sequential(
        *[m for _ in range(blocks) for m in (torch.nn.Linear(d, d), torch.nn.LayerNorm(d), torch.nn.GELU())]
    ).to(DEVICE)
    if fused and DEVICE == "cuda":
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=False)
    x = torch.randn(batch, d, device=DEVICE)

    def step():
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    for _ in range(3):
        step()

    def loop(n):
        for _ in TIMER.steps(n):
            loss = step()
        print(f"metric {loss.item():.6f}")

    return loop


def healthy_graph_infer():
    # bf16 ResNet-50 inference at batch 64, its forward captured once in a CUDA graph and
    # replayed on batches copied into its static input.
    torch = torch_setup()
    import torchvision

    batch, side = (2, 64) if small() else (64, 224)
    model = torchvision.models.resnet50(weights=None).to(DEVICE, dtype=torch.bfloat16, memory_format=torch.channels_last).eval()
    g = torch.Generator(device=DEVICE).manual_seed(0)
    inputs = [
        torch.randn(batch, 3, side, side, device=DEVICE, generator=g, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
        for _ in range(8)
    ]
    static_in = inputs[0].clone()
    if DEVICE == "cuda":
        side_stream = torch.cuda.Stream()
        side_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side_stream), torch.no_grad():
            for _ in range(3):
                model(static_in)
        torch.cuda.current_stream().wait_stream(side_stream)
        graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(graph):
            static_out = model(static_in)
        run = graph.replay
    else:
        static_out = torch.empty(batch, 1000, dtype=torch.bfloat16)

        def run():
            with torch.no_grad():
                static_out.copy_(model(static_in))

    def loop(n):
        votes = torch.zeros(1000, device=DEVICE)
        for i in TIMER.steps(n):
            static_in.copy_(inputs[i % len(inputs)])
            run()
            votes += static_out.float().softmax(-1).sum(0)
        print(f"metric {votes.argmax().item()}")

    return loop


def healthy_checkpoint():
    # A 25M-parameter MLP trained in bf16 with AdamW; every quarter of the loop the model
    # and optimizer state are saved with torch.save (300 MB copied to the host and written).
    torch = torch_setup()
    d, layers, batch = (64, 2, 32) if small() else (2048, 6, 8192)
    model = torch.nn.Sequential(*[m for _ in range(layers) for m in (torch.nn.Linear(d, d), torch.nn.GELU())]).to(DEVICE)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=DEVICE == "cuda")
    x = torch.randn(batch, d, device=DEVICE)
    target = torch.randn(batch, d, device=DEVICE)
    folder = tempfile.mkdtemp(prefix="reallib-ckpt-")

    def step():
        with autocast(torch):
            loss = torch.nn.functional.mse_loss(model(x).float(), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    for _ in range(3):
        step()

    def loop(n):
        for i in TIMER.steps(n):
            loss = step()
            if (i + 1) % (n // 4) == 0 and i + 1 < n:
                path = os.path.join(folder, "last.pt")
                torch.save({"step": i + 1, "model": model.state_dict(), "optimizer": opt.state_dict()}, path)
        print(f"metric {loss.item():.6f}")
        TAIL.append(lambda: shutil.rmtree(folder))

    return loop


# mode -> (steps key, set-up returning the loop, framework whose CUDA initialises first)
MODES = {
    "jax-nojit": ("jax-elementwise", lambda: jax_elementwise(False), "jax"),
    "jax-jit": ("jax-elementwise", lambda: jax_elementwise(True), "jax"),
    "hf-generate": ("generate", lambda: hf_generate(False), "torch"),
    "hf-generate-fixed": ("generate", lambda: hf_generate(True), "torch"),
    "lightning-fit": ("lightning", lambda: lightning_fit(False), "torch"),
    "lightning-fit-fixed": ("lightning", lambda: lightning_fit(True), "torch"),
    "cupy-elementwise": ("cupy-elementwise", lambda: cupy_elementwise(False), "cupy"),
    "cupy-fused": ("cupy-elementwise", lambda: cupy_elementwise(True), "cupy"),
    "loader-slow": ("loader", lambda: loader(False), "torch"),
    "loader-fast": ("loader", lambda: loader(True), "torch"),
    "augment-main": ("augment", lambda: augment(False), "torch"),
    "augment-gpu": ("augment", lambda: augment(True), "torch"),
    "item-logging": ("item-logging", lambda: item_logging(1), "torch"),
    "item-logging-fixed": ("item-logging", lambda: item_logging(50), "torch"),
    "cupy-asnumpy": ("cupy-asnumpy", lambda: cupy_asnumpy(False), "cupy"),
    "cupy-on-device": ("cupy-asnumpy", lambda: cupy_asnumpy(True), "cupy"),
    "numpy-pageable": ("numpy-copies", lambda: numpy_copies(False), "torch"),
    "numpy-pinned": ("numpy-copies", lambda: numpy_copies(True), "torch"),
    "adam-foreach-off": ("adam", lambda: adam(False), "torch"),
    "adam-fused": ("adam", lambda: adam(True), "torch"),
    "jax-numpy-sync": ("jax-train", lambda: jax_train(1), "jax"),
    "jax-on-device": ("jax-train", lambda: jax_train(50), "jax"),
    "healthy-graph-infer": ("graph-infer", healthy_graph_infer, "torch"),
    "healthy-loader": ("healthy-loader", healthy_loader, "torch"),
    "healthy-checkpoint": ("checkpoint", healthy_checkpoint, "torch"),
}
# What a loop leaves to after its timing: DataLoader iterators kept alive so their workers
# do not shut down inside the loop, clean-ups to run.
TAIL = []
# Modes whose loop times itself (a Lightning callback) instead of through TIMER.run.
SELF_TIMED = {"lightning-fit", "lightning-fit-fixed"}


def init_cuda(framework):
    """The first CUDA work of the program, so `cuda_s` starts where the mode's CUDA does."""
    if small():
        return
    if framework == "torch":
        import torch

        torch.cuda.synchronize()
    elif framework == "cupy":
        import cupy

        cupy.zeros(1).sum().get()
    else:
        import jax

        jax.device_put(0.0).block_until_ready()


# The time of the first CUDA call (set in main; the Lightning callback reads it).
CUDA_T0 = None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=MODES)
    p.add_argument("--form", choices=FORM, default="short")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: a smoke test at tiny sizes")
    args = p.parse_args()
    global DEVICE, CUDA_T0
    DEVICE = args.device
    key, setup, framework = MODES[args.mode]
    steps = STEPS[key][2 if small() else FORM[args.form]]
    CUDA_T0 = time.perf_counter()
    init_cuda(framework)
    loop = setup()
    if args.mode in SELF_TIMED:
        loop(steps)
    else:
        TIMER.run(loop, steps, CUDA_T0)
    for item in TAIL:
        if callable(item):
            item()


if __name__ == "__main__":
    main()
