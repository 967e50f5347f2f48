"""Output tokens/s of vLLM's CPU backend with and without rope-gen serving the
RoPE layers (a report, no target): one tiny model, processes alternated
(vLLM's kernels, then rope-gen's, ROUNDS times), each timing one generate()
after a warm-up.

    python throughput.py [MODEL] [--rounds N] [--prompts N] [--tokens N]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model", nargs="?", default="llama3")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, os.path.join(HERE, "models.py"), tmp, args.model], check=True)
        rates = {None: [], "ropegen": []}
        for _ in range(args.rounds):
            for plugins in rates:
                env = {k: v for k, v in os.environ.items() if k != "VLLM_PLUGINS"}
                if plugins:
                    env["VLLM_PLUGINS"] = plugins
                out = os.path.join(tmp, "out.json")
                subprocess.run([sys.executable, os.path.join(HERE, "generate.py"), tmp, out, args.model,
                                "--tokens", str(args.tokens), "--prompts", str(args.prompts), "--in-process",
                                "--warmup"], check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                result = json.load(open(out))[args.model]
                rates[plugins].append(result["output_tokens"] / result["seconds"])
    for plugins, values in rates.items():
        label = "rope-gen" if plugins else "vLLM's kernels"
        print(f"{args.model}, {args.prompts} prompts x {args.tokens} tokens, {label}: "
              + ", ".join(f"{v:.0f}" for v in values) + " output tokens/s")


if __name__ == "__main__":
    main()
