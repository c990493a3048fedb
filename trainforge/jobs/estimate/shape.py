"""What the estimate needs to know about a job's model and batch, from its flags or modelSize.

The bundled models' parameter shapes come from `trainforge.training.flops`, the same module
the models' FLOP counts use, with the runtime's defaults (`TrainConfig`) for unset flags; a
job running its own code states its size under `modelSize`: the GPT form (a decoder of that
shape) or the declared form (parameters, FLOPs and activation bytes per sample, no shape
assumed); without it the plan says "no estimate".
"""

from __future__ import annotations

from dataclasses import dataclass

from trainforge.jobs.spec import JobSpec
from trainforge.training import flops
from trainforge.training.config import TrainConfig

Shapes = tuple[tuple[int, ...], ...]


class NoEstimate(ValueError):
    """The planner cannot size this job's model (e.g. user code without `modelSize`)."""


@dataclass(frozen=True)
class ModelShape:
    kind: str  # "gpt" | "mlp" | "stated" (modelSize: GPT-like)
    blocks: tuple[Shapes, ...]  # parameter shapes of each FSDP unit (a block)
    root: Shapes  # parameters outside the blocks (embeddings, final norm, head)
    layers: int = 0
    d_model: int = 0
    heads: int = 1
    seq_len: int = 1
    vocab_size: int = 0
    batch_size: int = 1  # samples per rank per micro-step
    grad_accum: int = 1
    steps: int | None = None
    activation_checkpointing: bool = False
    precision: str = "auto"
    compile: bool = False
    source: str = "flags"
    # kind "declared" (modelSize's declared form): what the user stated
    declared_flops_per_sample: float = 0.0
    declared_tokens_per_sample: int = 1
    declared_tokens: bool = False  # the declared form named tokens (flopsPerToken, tokensPerSample)
    declared_activation_bytes: int = 0  # per sample

    @property
    def parameters(self) -> int:
        return sum(flops.numel(s) for b in (*self.blocks, self.root) for s in b)

    @property
    def tensors(self) -> int:
        return sum(len(b) for b in (*self.blocks, self.root))

    @property
    def embedding_parameters(self) -> int:
        if self.kind in ("mlp", "declared"):
            return 0
        return flops.gpt_embedding_params(self.d_model, self.seq_len, self.vocab_size)

    @property
    def has_tokens(self) -> bool:
        """Whether the model's samples are token sequences: a GPT (flags or modelSize's GPT
        form), or a declared model that states tokens (`flopsPerToken`/`tokensPerSample`).
        An MLP or a CNN declared by its FLOPs per sample has samples, not tokens."""
        if self.kind == "declared":
            return self.declared_tokens
        return self.kind != "mlp"

    @property
    def tokens_per_sample(self) -> int:
        if self.kind == "declared":
            return self.declared_tokens_per_sample
        return 1 if self.kind == "mlp" else self.seq_len

    def flops_per_sample(self) -> float:
        """The runtime's MFU accounting (the models call the same functions)."""
        if self.kind == "declared":
            return self.declared_flops_per_sample
        if self.kind == "mlp":
            return flops.dense_flops_per_sample(self.parameters)
        n = self.parameters - self.embedding_parameters
        return flops.gpt_flops_per_sample(n, self.layers, self.d_model, self.seq_len)

    @property
    def matmul_parameters(self) -> int:
        """Weights autocast casts to bf16 (Linear weights and biases; not norms/embeddings)."""
        if self.kind in ("mlp", "declared"):
            return self.parameters
        per_block = sum(flops.numel(s) for s in self.blocks[0] if len(s) == 2) if self.blocks else 0
        return per_block * len(self.blocks) + self.vocab_size * self.d_model


def shape_of(job: JobSpec) -> ModelShape:
    """The model and batch a job trains; raises NoEstimate when they are unknown."""
    if job.model_size is not None:
        return _stated(job)
    # A job running its own code (`entrypoint`, added by the user-code work beside this) is not
    # the bundled model: without modelSize there is nothing to size.
    if getattr(job, "entrypoint", None):
        raise NoEstimate("the job runs its own code (entrypoint) and states no modelSize")
    t = job.training
    d = TrainConfig()
    model = t.model or d.model

    def pick(value: int | None, default: int) -> int:
        return default if value is None else value

    common = {
        "batch_size": pick(t.batch_size, d.batch_size),
        "grad_accum": pick(t.grad_accum, d.grad_accum),
        "steps": pick(t.steps, d.steps),
        "activation_checkpointing": t.activation_checkpointing,
        "precision": t.precision or d.precision,
        "compile": t.compile,
    }
    if model == "mlp":
        blocks, root = flops.mlp_param_shapes()
        return ModelShape(
            "mlp",
            tuple(tuple(b) for b in blocks),
            tuple(root),
            layers=len(blocks),
            d_model=max(flops.MLP_SIZES),
            vocab_size=flops.MLP_SIZES[-1],
            **common,
        )
    layers, d_model = pick(t.layers, d.layers), pick(t.d_model, d.d_model)
    seq_len, vocab = pick(t.seq_len, d.seq_len), pick(t.vocab_size, d.vocab_size)
    blocks, root = flops.gpt_param_shapes(layers, d_model, seq_len, vocab)
    return ModelShape(
        "gpt",
        tuple(tuple(b) for b in blocks),
        tuple(root),
        layers=layers,
        d_model=d_model,
        heads=pick(t.heads, d.heads),
        seq_len=seq_len,
        vocab_size=vocab,
        **common,
    )


def _stated(job: JobSpec) -> ModelShape:
    m = job.model_size
    assert m is not None
    if not m.shaped:  # the steps-only form: the run is timed from expectedStepSeconds
        raise NoEstimate(
            "no model shape: modelSize states only steps; the run is timed from expectedStepSeconds"
        )
    if m.declared:
        assert m.parameters is not None and m.flops_per_sample is not None
        return ModelShape(
            "declared",
            (),
            ((m.parameters,),),
            batch_size=m.batch_size,
            grad_accum=m.grad_accum,
            steps=m.steps,
            activation_checkpointing=False,  # the declared bytes are what it keeps
            precision="auto",
            source="modelSize (declared)",
            declared_flops_per_sample=m.flops_per_sample,
            declared_tokens_per_sample=m.tokens_per_sample,
            declared_tokens=m.flops_per_token is not None
            or "tokens_per_sample" in m.model_fields_set,
            declared_activation_bytes=m.activation_bytes_per_sample or 0,
        )
    assert m.layers and m.d_model and m.seq_len and m.vocab_size is not None
    blocks, root = flops.gpt_param_shapes(m.layers, m.d_model, m.seq_len, m.vocab_size)
    if m.parameters is not None:
        # A stated total that differs from the GPT shape (tied embeddings, another MLP
        # ratio, biases): the blocks keep their shape, the root absorbs the difference.
        in_blocks = sum(flops.numel(s) for b in blocks for s in b)
        rest = m.parameters - in_blocks
        if rest < 0:
            raise NoEstimate(
                f"modelSize.parameters {m.parameters} is smaller than {m.layers} GPT blocks of "
                f"dModel {m.d_model} ({in_blocks} parameters)"
            )
        root = [(rest,)]
    return ModelShape(
        "stated",
        tuple(tuple(b) for b in blocks),
        tuple(root),
        layers=m.layers,
        d_model=m.d_model,
        heads=m.heads or max(1, m.d_model // 128),
        seq_len=m.seq_len,
        vocab_size=m.vocab_size,
        batch_size=m.batch_size,
        grad_accum=m.grad_accum,
        steps=m.steps,
        activation_checkpointing=m.activation_checkpointing,
        precision="auto",
        source="modelSize",
    )
