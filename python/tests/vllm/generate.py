"""Greedy generation with vLLM's CPU backend in one process, model after model;
whether rope-gen serves the RoPE layers is the environment's VLLM_PLUGINS.

    python generate.py MODELS_DIR OUT.json NAME [NAME ...] [--tokens N] [--prompts N] [--report-dir DIR] [--in-process] [--warmup]

OUT.json: {name: {"tokens": [[ids] per prompt], "logprobs": [[logprob of each
chosen token] per prompt], "seconds": generate()'s wall time, "output_tokens",
"pid": this process}}.
Prompts are token ids (no tokenizer): a short one and one of 48 tokens, so
generated positions reach 48 + N, past the scaled models' original context.
--report-dir: ROPEGEN_VLLM_REPORT is DIR/NAME.jsonl while NAME runs (vLLM's
engine process, started per model, inherits it).
"""
import argparse
import gc
import json
import os
import time

from models import MODELS


def prompts(count):
    """count prompts of token ids below 500 (the tiny models' vocab is 512)."""
    state, out = 12345, []
    for i in range(count):
        ids = []
        for _ in range(8 if i % 2 == 0 else 48):
            state = (state * 1103515245 + 12345) % 2 ** 31
            ids.append(3 + state % 497)
        out.append(ids)
    return out


def run(models_dir, name, tokens, count, in_process, warmup=False):
    from vllm import LLM, SamplingParams
    extra = dict(MODELS[name].engine)
    if in_process:
        extra["distributed_executor_backend"] = "uni"
    llm = LLM(model=os.path.join(models_dir, name), dtype="float32", skip_tokenizer_init=True, enforce_eager=True,
              **extra,
              max_model_len=256, max_num_seqs=max(count, 2), seed=0,
              # The CPU backend reserves gpu_memory_utilization of RAM; an explicit KV
              # size (plenty for these models) also skips its warm-up pass.
              gpu_memory_utilization=0.05, kv_cache_memory_bytes=64 << 20)
    params = SamplingParams(temperature=0.0, max_tokens=tokens, logprobs=0, detokenize=False, ignore_eos=True)
    inputs = [{"prompt_token_ids": ids} for ids in prompts(count)]
    if warmup:  # kernels loaded and vLLM's first-step costs paid before the timed run
        llm.generate(inputs, SamplingParams(temperature=0.0, max_tokens=4, detokenize=False), use_tqdm=False)
    start = time.perf_counter()
    outputs = llm.generate(inputs, params, use_tqdm=False)
    seconds = time.perf_counter() - start
    result = {"tokens": [], "logprobs": [], "seconds": seconds, "pid": os.getpid()}
    for out in outputs:
        completion = out.outputs[0]
        result["tokens"].append(list(completion.token_ids))
        result["logprobs"].append([step[t].logprob for t, step in zip(completion.token_ids, completion.logprobs)])
    result["output_tokens"] = sum(len(t) for t in result["tokens"])
    del llm
    gc.collect()
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("models_dir")
    parser.add_argument("out")
    parser.add_argument("names", nargs="+")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--report-dir")
    parser.add_argument("--warmup", action="store_true", help="one short generate() before the timed one")
    parser.add_argument("--in-process", action="store_true",
                        help="engine and model in this process (vLLM starts two processes per model otherwise)")
    args = parser.parse_args()
    if args.in_process:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    results = {}
    for name in args.names:
        if args.report_dir:
            os.environ["ROPEGEN_VLLM_REPORT"] = os.path.join(args.report_dir, name + ".jsonl")
        try:
            results[name] = run(args.models_dir, name, args.tokens, args.prompts, args.in_process, args.warmup)
        except Exception as e:  # one model vLLM cannot run must not hide the others
            results[name] = {"error": f"{type(e).__name__}: {e}"}
    with open(args.out, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
