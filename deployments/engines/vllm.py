"""The model replica's two vLLM engines.

`classify`: a sequence-classification model on vLLM's pooling runner; one forward pass
gives the label distribution.
`generate`: an instruct LLM answers with one label, constrained by
`StructuredOutputsParams(choice=labels)`; every prompt starts with the same instruction
so vLLM's prefix cache reuses its KV blocks.
"""

from __future__ import annotations

import gc
import math
import os
import time
from pathlib import Path
from typing import Any, Literal, cast

import yaml

from deployments.engines import EngineConfig, Prediction, TicketEngine, TokenizerInfo
from deployments.engines.device_readings import cuda_available
from models.artifacts import ModelMetadata
from models.prompt import TICKET_SLOT, instruction_text, plain_template
from models.ranking import runners_up


class _VLLMEngine(TicketEngine):
    """Shared start-up and text fallback for both modes."""

    runner: Literal["generate", "pooling"] = "generate"

    def __init__(self, config: EngineConfig, model_dir: str):
        from transformers import AutoTokenizer
        from vllm import AsyncEngineArgs
        from vllm.platforms import current_platform
        from vllm.v1.engine.async_llm import AsyncLLM

        self.metadata = ModelMetadata.load_locked(model_dir)
        # Only used on the fallback path and to pre-tokenize the instruction.
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        if tokenizer is None:
            raise ValueError(f"{model_dir} has no tokenizer")
        self.tokenizer = tokenizer
        # Settings passed only where given: vLLM's own defaults otherwise.
        extra: dict[str, Any] = {}
        if config.max_model_len_tokens is not None:
            extra["max_model_len"] = config.max_model_len_tokens
        if config.cpu_threads is not None and current_platform.is_cpu():
            # Read when the engine-core process vLLM spawns imports torch; Ray set this
            # replica's own to its num_cpus, and vLLM keeps an OMP_NUM_THREADS it finds.
            os.environ["OMP_NUM_THREADS"] = str(config.cpu_threads)
        if config.cpu_worker_in_engine_process and current_platform.is_cpu():
            # vLLM's CPU platform otherwise runs the model in a worker process of its own,
            # fed each step through shared memory: on 2 cores that hand-off cost a third of
            # the encode rate. vLLM reads it while it builds this engine's config.
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        elif config.ipc_busy_wait_ms is not None and current_platform.is_cpu():
            from deployments.engines.vllm_cpu_worker import BUSY_WAIT_ENV

            # Read by the worker process vLLM spawns, which inherits this replica's environment.
            os.environ[BUSY_WAIT_ENV] = str(config.ipc_busy_wait_ms)
            extra["worker_cls"] = "deployments.engines.vllm_cpu_worker.ShortSpinCPUWorker"
        args = AsyncEngineArgs(
            model=model_dir,
            runner=self.runner,
            dtype=config.dtype,
            enforce_eager=config.enforce_eager,
            gpu_memory_utilization=config.gpu_memory_utilization,
            max_num_seqs=config.max_num_seqs,
            enable_prefix_caching=config.enable_prefix_caching if self.runner == "generate" else False,
            kv_cache_memory_bytes=config.kv_cache_memory_bytes,
            # The classifier gets token ids only (the tokenizer stage's, or this engine's own
            # for text): vLLM's front end and engine core would each load the tokenizer
            # again, a third of the engine's start.
            skip_tokenizer_init=self.runner == "pooling",
            **extra,
        )
        stat_loggers: list[Any] | None = None
        if config.engine_metrics:
            # vLLM's Prometheus logger writes to its own registry, which nothing scrapes
            # inside a Serve replica; this one records through ray.util.metrics instead.
            from vllm.v1.metrics.ray_wrappers import RayPrometheusStatLogger

            stat_loggers = [RayPrometheusStatLogger]
        self.engine = AsyncLLM.from_engine_args(args, stat_loggers=stat_loggers)
        self.max_model_len = self.engine.model_config.max_model_len
        if config.extra_niceness:
            _renice_children(config.extra_niceness)

    def _text_ids(self, text: str, add_special_tokens: bool, max_tokens: int) -> list[int]:
        return self.tokenizer(text, add_special_tokens=add_special_tokens, truncation=True, max_length=max_tokens)[
            "input_ids"
        ]

    def batch_capacity(self) -> int:
        """The scheduler's max_num_seqs, and for models with a KV cache as many full-length
        sequences as its blocks hold (vLLM sizes those from gpu_memory_utilization)."""
        cfg = self.engine.vllm_config
        max_seqs = cfg.scheduler_config.max_num_seqs
        blocks = cfg.cache_config.num_gpu_blocks
        # Encoder-only models (the pooling classifier) keep no KV between steps: vLLM's
        # token-level block count says nothing about how many sequences fit.
        if not blocks or cfg.model_config.attn_type in ("encoder_only", "attention_free"):
            return max_seqs
        return max(1, min(max_seqs, blocks * cfg.cache_config.block_size // self.max_model_len))

    async def free_caches(self) -> None:
        await self.engine.reset_prefix_cache()
        gc.collect()
        if cuda_available():
            import torch

            torch.cuda.empty_cache()

    async def check_health(self) -> None:
        await self.engine.check_health()

    def shutdown(self) -> None:
        self.engine.shutdown()


class VLLMClassifyEngine(_VLLMEngine):
    runner = "pooling"

    def tokenizer_info(self) -> TokenizerInfo:
        return TokenizerInfo(self.metadata.tokenizer_hash, True, self.max_model_len)

    async def predict(self, prompt: list[int] | str, request_id: str, tenant: str | None = None) -> Prediction:
        from vllm import PoolingParams, TokensPrompt

        if isinstance(prompt, str):
            prompt = self._text_ids(prompt, True, self.max_model_len)
        final = None
        async for out in self.engine.encode(
            TokensPrompt(prompt_token_ids=prompt), PoolingParams(task="classify"), request_id
        ):
            final = out
        if final is None:
            raise RuntimeError(f"vLLM ended request {request_id} without an output")
        probs = final.outputs.data
        best = int(probs.argmax())
        others = runners_up(self.metadata.labels, probs.tolist())
        return Prediction(self.metadata.labels[best], float(probs[best]), runners_up=others)


class VLLMGenerateEngine(_VLLMEngine):
    runner = "generate"

    def __init__(self, config: EngineConfig, model_dir: str):
        super().__init__(config, model_dir)
        self.max_label_tokens = config.max_label_tokens
        labels = self.metadata.labels
        instruction = instruction_text(self.metadata.instruction, labels)
        tenants = _tenant_instructions(config.tenant_instructions_file)
        # Token ids of a head are identical for every ticket of its tenant, so vLLM's prefix cache hits.
        self.heads = {None: self._head_ids(instruction)} | {
            tenant: self._head_ids(f"{instruction}\n\n{text.strip()}") for tenant, text in tenants.items()
        }
        self.tail_ids = self.tokenizer(self._template(instruction)[1], add_special_tokens=False)["input_ids"]
        longest = max(len(h) for h in self.heads.values())
        self.max_ticket_tokens = self.max_model_len - longest - len(self.tail_ids) - self.max_label_tokens
        if self.max_ticket_tokens < 16:
            raise ValueError(
                f"max_model_len {self.max_model_len} leaves {self.max_ticket_tokens} tokens for a "
                f"ticket after a {longest}-token instruction; raise max_model_len_tokens"
            )

    def _template(self, instruction: str) -> tuple[str, str]:
        if getattr(self.tokenizer, "chat_template", None):
            # tokenize=False: the template's text.
            template = cast(
                str,
                self.tokenizer.apply_chat_template(
                    [{"role": "system", "content": instruction}, {"role": "user", "content": TICKET_SLOT}],
                    tokenize=False,
                    add_generation_prompt=True,
                ),
            )
        else:
            template = plain_template(instruction)
        head, tail = template.split(TICKET_SLOT)
        return head, tail

    def _head_ids(self, instruction: str) -> list[int]:
        return self.tokenizer(self._template(instruction)[0], add_special_tokens=True)["input_ids"]

    def tokenizer_info(self) -> TokenizerInfo:
        return TokenizerInfo(self.metadata.tokenizer_hash, False, self.max_ticket_tokens)

    def prefixes(self) -> dict[str, list[int]]:
        return {tenant: ids for tenant, ids in self.heads.items() if tenant is not None}

    def kv_cache(self) -> tuple[int, int]:
        cache = self.engine.vllm_config.cache_config
        return cache.num_gpu_blocks or 0, cache.block_size

    async def warm(self, prefix_ids: list[int], request_id: str) -> None:
        from vllm import SamplingParams, TokensPrompt

        async for _ in self.engine.generate(
            TokensPrompt(prompt_token_ids=list(prefix_ids)), SamplingParams(max_tokens=1), request_id
        ):
            pass

    async def warm_up(self, request_id: str) -> bool:
        # vLLM sets up its structured-output backend (xgrammar's vocabulary tables) and
        # compiles the label grammar on the first constrained request: 2.4 s on the tiny
        # decoder here (the next ones 0.03 s), which the first tickets after every deploy,
        # restart or scale-up would otherwise wait; the grammar stays cached.
        await self.predict("Where is my order?", request_id)
        return True

    async def predict(self, prompt: list[int] | str, request_id: str, tenant: str | None = None) -> Prediction:
        from vllm import SamplingParams, TokensPrompt
        from vllm.sampling_params import StructuredOutputsParams

        if isinstance(prompt, str):
            prompt = self._text_ids(prompt, False, self.max_ticket_tokens)
        key = tenant if tenant in self.heads else None
        params = SamplingParams(
            temperature=0.0,
            max_tokens=self.max_label_tokens,
            structured_outputs=StructuredOutputsParams(choice=self.metadata.labels),
            logprobs=0,
        )
        ids = self.heads[key] + prompt + self.tail_ids
        start = time.perf_counter()
        ttft_ms, final = 0.0, None
        async for out in self.engine.generate(TokensPrompt(prompt_token_ids=ids), params, request_id):
            if final is None:
                ttft_ms = (time.perf_counter() - start) * 1000
            final = out
        if final is None:
            raise RuntimeError(f"vLLM ended request {request_id} without an output")
        completion = final.outputs[0]
        logprob = completion.cumulative_logprob
        confidence = math.exp(logprob) if logprob is not None else 0.0
        return Prediction(completion.text.strip(), confidence, key, len(ids), final.num_cached_tokens or 0, ttft_ms)


def _tenant_instructions(path: str | None) -> dict[str, str]:
    if path is None:
        return {}
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise ValueError(f"{path}: must map tenant names to instruction text")
    return data


def _renice_children(increment: int) -> None:
    """The engine core and its workers are this replica's child processes."""
    import psutil

    for child in psutil.Process().children(recursive=True):
        try:
            child.nice(min(19, child.nice() + increment))
        except psutil.Error:  # gone, or not ours to change: priority is an optimization
            pass
