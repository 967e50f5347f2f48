def pytest_terminal_summary(terminalreporter):
    """The largest logprob difference per model, which the issue asks to state."""
    rows = [(report.nodeid.rsplit("[", 1)[-1].rstrip("]"), value)
            for report in terminalreporter.stats.get("passed", [])
            for key, value in report.user_properties if key == "max_logprob_diff"]
    if rows:
        terminalreporter.write_line("largest |logprob difference|, rope-gen vs vLLM's kernels (float32): " +
                                    ", ".join(f"{name} {value:.1e}" for name, value in rows))
