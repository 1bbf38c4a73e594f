"""A vLLM OpenAI server: started by the harness on 127.0.0.1 (`ServerEngine`) or already
running somewhere (`AttachedEngine`), driven with vLLM's own benchmark client.

Load generation is `vllm.benchmarks.serve.benchmark()` (concurrency limit, TTFT/TPOT/ITL,
percentiles). Its stock request function keeps only text, so the harness registers one more
request function (`_capturing_request_func`) that also keeps what a speculative-decoding
benchmark needs and vLLM's client drops: the output token ids (`return_token_ids`, for the
lossless check), the finish reason and the per-request acceptance summary
(`metrics.speculative_decoding`, for confidence intervals). Counters are scraped from
`/metrics` right before and after each batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.engine.base import Arrivals, BatchResult, GenOutput, GenRequest, Sampling, track
from harness.engine.counters import SpecCounters, SpecSummary, counters_from_prometheus
from harness.engine.logs import failing_checkpoint, tail
from harness.engine.ownership import child_preexec, start_watchdog, stop_group
from harness.engine.settings import EnginePlan, single_process
from harness.errors import InfraError

_FUNC_NAME = "harness-completions"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http_get(url: str, timeout: float = 10) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - loopback/attach URL
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
    except (urllib.error.URLError, OSError) as e:
        raise ConnectionError(str(e)) from e


def _http_post_json(url: str, body: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    """POST `body` as JSON; the decoded answer (an error's body too), or None when unreachable."""
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 - loopback/attach URL
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        return {"error": e.read().decode(errors="replace")[:500], "status": e.code}
    except (urllib.error.URLError, OSError):
        return None


@dataclass
class _Captured:
    token_ids: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    spec: SpecSummary | None = None
    logprobs: list[dict[int, float]] | None = None
    itl_tokens: list[int] = field(default_factory=list)  # tokens in each chunk after the first
    cache_salt: str | None = None  # sent with the request (GenRequest.cache_salt)


def token_logprobs(choice_logprobs: dict[str, Any] | None) -> list[dict[int, float]]:
    """A completions chunk's `logprobs.top_logprobs` (keys `token_id:N`, asked for with
    `return_tokens_as_token_ids`: decoded strings would merge distinct tokens) as
    {token id: logprob} per position."""
    out = []
    for pos in (choice_logprobs or {}).get("top_logprobs") or []:
        out.append({int(k.removeprefix("token_id:")): float(v) for k, v in (pos or {}).items()})
    return out


def _completion_payload(rfi) -> dict[str, Any]:
    payload = {
        "model": rfi.model_name or rfi.model,
        "prompt": rfi.prompt,
        "max_tokens": rfi.output_len,
        "stream": True,
        "stream_options": {"include_usage": True},
        "return_token_ids": True,
        **(rfi.extra_body or {}),
    }
    if rfi.ignore_eos:
        payload["ignore_eos"] = True
    return payload


@dataclass
class _Clock:
    start: float
    last: float


def _on_stream_object(obj: dict[str, Any], out, cap: _Captured, clock: _Clock) -> None:
    """Fold one streamed completion chunk into the output (timings) and the capture (tokens)."""
    for choice in obj.get("choices") or []:
        now = time.perf_counter()
        ids = choice.get("token_ids") or []
        if ids or choice.get("text"):
            if not out.ttft:
                out.ttft = now - clock.start
            else:
                out.itl.append(now - clock.last)
                cap.itl_tokens.append(max(1, len(ids)))
            clock.last = now
        cap.token_ids.extend(ids)
        if cap.logprobs is not None:  # asked for: one {token id: logprob} per output token
            cap.logprobs.extend(token_logprobs(choice.get("logprobs")))
        out.generated_text += choice.get("text") or ""
        if choice.get("finish_reason"):
            cap.finish_reason = choice["finish_reason"]
    if obj.get("usage"):
        out.output_tokens = obj["usage"].get("completion_tokens") or 0
    spec = (obj.get("metrics") or {}).get("speculative_decoding")
    if spec:
        cap.spec = SpecSummary.from_vllm(spec)


async def _stream_completion(session, rfi, out, cap: _Captured, clock: _Clock) -> None:
    from vllm.benchmarks.lib.endpoint_request_func import StreamedResponseHandler

    headers = {"x-request-id": rfi.request_id} if rfi.request_id else {}
    payload = _completion_payload(rfi)
    if cap.cache_salt:
        payload["cache_salt"] = cap.cache_salt
    if "logprobs" in payload:
        cap.logprobs = cap.logprobs or []
    async with session.post(rfi.api_url, json=payload, headers=headers) as resp:
        if resp.status != 200:
            out.error = f"HTTP {resp.status}: {(await resp.text())[:300]}"
            return
        handler = StreamedResponseHandler()
        async for chunk in resp.content.iter_any():
            for message in handler.add_chunk(chunk.strip()):
                data = message.removeprefix("data: ")
                if message.startswith(":") or data == "[DONE]":
                    continue
                _on_stream_object(json.loads(data), out, cap, clock)
        out.success = True


def _capturing_request_func(store: dict[str, _Captured], timeout_s: float):
    """An OpenAI-completions streaming client in the shape of vLLM's request functions."""
    from vllm.benchmarks.lib.endpoint_request_func import RequestFuncOutput

    async def request_func(request_func_input, session, pbar=None):
        cap = store.setdefault(request_func_input.request_id or "", _Captured())
        out = RequestFuncOutput(prompt_len=request_func_input.prompt_len)
        st = time.perf_counter()
        out.start_time = st
        try:
            await asyncio.wait_for(_stream_completion(session, request_func_input, out, cap, _Clock(st, st)), timeout_s)
        except TimeoutError:
            out.success, out.error = False, f"timed out after {timeout_s:.0f}s"
        except Exception as e:  # noqa: BLE001 - one failed request must not sink the batch
            out.success, out.error = False, f"{type(e).__name__}: {e}"
        if out.success and out.error:
            out.success = False
        out.latency = time.perf_counter() - st
        if out.output_tokens == 0:
            out.output_tokens = len(cap.token_ids)
        if pbar:
            pbar.update(1)
        return out

    return request_func


def _extra_body(sampling: Sampling) -> dict[str, Any]:
    """The sampling settings vLLM's client sends in each request's body."""
    extra: dict[str, Any] = {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "skip_special_tokens": False,
    }
    if sampling.seed is not None:
        extra["seed"] = sampling.seed
    if sampling.stop_token_ids:
        extra["stop_token_ids"] = list(sampling.stop_token_ids)
    if sampling.logprobs is not None:
        extra.update(logprobs=sampling.logprobs, return_tokens_as_token_ids=True)
    return extra


def scheduled_arrivals(n: int, arrivals: Arrivals) -> list[float]:
    """The arrival offsets (s) vLLM's benchmark client draws for n requests, as its `get_request`
    draws them: gamma gaps of shape `burstiness`, scale 1 / (rate x burstiness), from numpy's
    global generator seeded with `arrivals.seed` (scalar draws in request order), cumulated and
    rescaled so the last request arrives at n / rate."""
    import numpy as np

    state = np.random.RandomState(arrivals.seed)  # the legacy global generator's stream for this seed
    theta = 1.0 / (arrivals.rate * arrivals.burstiness)
    t = np.cumsum([state.gamma(shape=arrivals.burstiness, scale=theta) for _ in range(n)])
    return (t * (n / arrivals.rate / t[-1])).tolist() if n and t[-1] else [0.0] * n


def _from_arrival(o: GenOutput, arrival_s: float, first_arrival_s: float) -> None:
    """Open loop: time a request from its scheduled arrival, not from when it got a slot under the
    concurrency cap (vLLM's client starts the clock at the slot): a wait for a slot counts, as a
    server's queue would. sent_s becomes the arrival, from the batch's first."""
    if o.sent_s is None:
        return
    wait = max(0.0, o.sent_s - (arrival_s - first_arrival_s))
    o.ttft_s = o.ttft_s + wait if o.ttft_s is not None else None
    o.latency_s = o.latency_s + wait if o.latency_s is not None else None
    o.sent_s, o.queue_s = arrival_s - first_arrival_s, wait


def _outputs(
    requests: list[GenRequest], result: dict[str, Any], store: dict[str, _Captured], arrivals: Arrivals | None
) -> list[GenOutput]:
    """vLLM's benchmark result per request (timings, in request order), joined with what the
    capturing request function kept (tokens, finish reason, acceptance); send times from the
    batch's first send; open loop, timed from the scheduled arrivals (_from_arrival)."""
    starts = [t for t in result["start_times"] if t]
    first = min(starts, default=0.0)
    schedule = scheduled_arrivals(len(requests), arrivals) if arrivals else None
    outputs = []
    for i, r in enumerate(requests):
        cap = store.get(r.request_id, _Captured())
        err = result["errors"][i] or None
        o = GenOutput(
            r.request_id,
            len(r.prompt_token_ids),
            output_token_ids=cap.token_ids,
            finish_reason=cap.finish_reason,
            ttft_s=result["ttfts"][i] or None,
            itl_s=list(result["itls"][i]),
            itl_tokens=cap.itl_tokens,
            latency_s=result["latencies"][i],
            sent_s=result["start_times"][i] - first if result["start_times"][i] else None,
            error=err,
            spec=cap.spec,
            logprobs=cap.logprobs,
        )
        if schedule:
            _from_arrival(o, schedule[i], schedule[0])
        outputs.append(o)
    return outputs


class _OpenAIServer:
    """What the started and the attached server have in common: load, counters, health."""

    kind = "server"

    def __init__(self, url: str, model_name: str, request_timeout_s: float):
        self.url = url.rstrip("/")
        self.model_name = model_name
        self.request_timeout_s = request_timeout_s
        self.last_benchmark: dict[str, Any] | None = None

    def died(self) -> str | None:
        """Why the server is gone, when the harness can tell (it started it); None otherwise."""
        return None

    def counters(self) -> tuple[SpecCounters, dict[str, float]]:
        try:
            status, text = _http_get(self.url + "/metrics")
        except ConnectionError as e:
            raise InfraError(
                self.died() or f"{self.url}/metrics unreachable ({e}); is the server still running?"
            ) from e
        if status != 200:
            raise InfraError(f"{self.url}/metrics answered HTTP {status}")
        return counters_from_prometheus(text)

    def rescore(self, sequences: list[tuple[list[int], int]], top: int | None = None) -> list[list[dict[int, float]]]:
        """The Rescorer (harness/engine/base.py) through the completions API: each sequence as a
        prompt with `prompt_logprobs` (the whole vocabulary, or `top` tokens plus the prompt's own),
        one token generated greedily and ignored. The server needs --max-logprobs -1 (the harness
        starts it so)."""
        out = []
        for ids, start in sequences:
            body = {
                "model": self.model_name,
                "prompt": list(ids),
                "max_tokens": 1,
                "temperature": 0.0,
                "prompt_logprobs": top or -1,
            }
            data = _http_post_json(self.url + "/v1/completions", body, self.request_timeout_s)
            if data is None:
                raise InfraError(self.died() or f"{self.url}/v1/completions unreachable while re-scoring")
            if "choices" not in data:
                raise InfraError(
                    f"{self.url} refused prompt_logprobs for the T > 0 distribution test ({str(data)[:200]}); "
                    "start it with --max-logprobs -1, or set bench.lossless_logprobs = 0 to skip the test"
                )
            rows = data["choices"][0].get("prompt_logprobs") or []
            out.append(
                [
                    {int(t): float(lp["logprob"]) for t, lp in (rows[i] or {}).items()}
                    for i in range(max(start, 1), len(ids))
                ]
            )
        return out

    def generate(
        self,
        requests: list[GenRequest],
        sampling: Sampling,
        concurrency: int,
        timeout_s: float | None = None,
        arrivals: Arrivals | None = None,
    ) -> BatchResult:
        from vllm.benchmarks.datasets import SampleRequest
        from vllm.benchmarks.lib import endpoint_request_func as erf
        from vllm.benchmarks.serve import TaskType, benchmark

        store = {r.request_id: _Captured(cache_salt=r.cache_salt) for r in requests if r.cache_salt}
        erf.ASYNC_REQUEST_FUNCS[_FUNC_NAME] = _capturing_request_func(store, timeout_s or self.request_timeout_s)
        samples = [
            SampleRequest(
                prompt=list(r.prompt_token_ids),
                prompt_len=len(r.prompt_token_ids),
                expected_output_len=r.max_tokens,
                request_id=r.request_id,
            )
            for r in requests
        ]
        extra = _extra_body(sampling)
        before, tb = self.counters()
        log = io.StringIO()
        if arrivals is not None:  # vLLM draws the gaps from numpy's global generator (scheduled_arrivals)
            import numpy as np

            np.random.seed(arrivals.seed)
        try:
            with contextlib.redirect_stdout(log):  # vLLM's benchmark prints its own report
                result = asyncio.run(
                    benchmark(
                        task_type=TaskType.GENERATION,
                        endpoint_type=_FUNC_NAME,
                        api_url=self.url + "/v1/completions",
                        base_url=self.url,
                        model_id=self.model_name,
                        model_name=self.model_name,
                        tokenizer=None,
                        input_requests=samples,
                        logprobs=None,
                        request_rate=arrivals.rate if arrivals else float("inf"),
                        burstiness=arrivals.burstiness if arrivals else 1.0,
                        disable_tqdm=True,
                        num_warmups=0,
                        profile=False,
                        selected_percentile_metrics=["ttft", "tpot", "itl", "e2el"],
                        selected_percentiles=[50.0, 99.0],
                        ignore_eos=sampling.ignore_eos,
                        goodput_config_dict={},
                        max_concurrency=concurrency,
                        lora_modules=None,
                        extra_headers=None,
                        extra_body=extra,
                        ready_check_timeout_sec=0,
                    )
                )
        except Exception as e:  # noqa: BLE001
            raise InfraError(
                self.died() or f"benchmark client failed against {self.url}: {type(e).__name__}: {e}"
            ) from e
        finally:
            erf.ASYNC_REQUEST_FUNCS.pop(_FUNC_NAME, None)
        after, ta = self.counters()
        self.last_benchmark = {k: v for k, v in result.items() if not isinstance(v, list)}
        outputs = _outputs(requests, result, store, arrivals)
        return BatchResult(outputs, float(result["duration"]), after - before, **BatchResult.deltas(tb, ta))

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "url": self.url, "model_name": self.model_name}

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class AttachedEngine(_OpenAIServer):
    """A server the harness did not start and will not stop (production)."""

    kind = "attach"

    def __init__(
        self, url: str, model_name: str | None = None, request_timeout_s: float = 600, setting: str = "bench.url"
    ):
        try:
            status, body = _http_get(url.rstrip("/") + "/v1/models")
        except ConnectionError as e:
            raise InfraError(
                f"cannot reach {url} ({e}); check {setting} in the recipe and that the server is up"
            ) from e
        if status != 200:
            raise InfraError(f"{url}/v1/models answered HTTP {status}; is this a vLLM OpenAI server?")
        served = [m["id"] for m in json.loads(body).get("data", [])]
        if model_name is None:
            model_name = served[0] if served else "default"
        elif model_name not in served:
            raise InfraError(f"{url} serves {served}, not {model_name!r}")
        super().__init__(url, model_name, request_timeout_s)


SERVER_GRACE_S = 10.0


class ServerEngine(_OpenAIServer):
    """`python -m vllm.entrypoints.openai.api_server` on 127.0.0.1, with its log kept."""

    def __init__(
        self,
        plan: EnginePlan,
        log_path: Path,
        startup_timeout_s: float = 600,
        request_timeout_s: float = 600,
        python: str | None = None,
    ):
        """`python`: the interpreter of the vLLM installation to serve from (harness/engine/environments.py;
        default this process's)."""
        plan = single_process(plan)
        self.plan = plan
        self.log_path = log_path
        port = free_port()
        super().__init__(f"http://127.0.0.1:{port}", plan.served_model_name, request_timeout_s)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = log_path.open("w")
        self.python = python or sys.executable
        cmd = plan.server_command(self.python, "127.0.0.1", port)
        self.command = cmd
        self._log.write("$ " + " ".join(cmd) + "\n")
        self._log.flush()
        env = {**os.environ, **plan.env}
        # Its own process group, so stopping it stops its engine-core children too, and only them;
        # a parent-death signal and a watchdog in that group stop it when the harness dies.
        self._proc = subprocess.Popen(
            cmd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            stdin=subprocess.DEVNULL,
            process_group=0,
            preexec_fn=child_preexec(),
        )
        self._watchdog = start_watchdog(self._proc.pid)
        track(self)
        t0 = time.perf_counter()
        try:
            self._wait_healthy(startup_timeout_s)
        except BaseException:  # Ctrl-C while starting: stop what was started
            self.close()
            raise
        self.startup_s = round(time.perf_counter() - t0, 1)

    def _wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self.close()
                raise InfraError(
                    f"vLLM server for {self._failing()} exited with code {self._proc.returncode} while starting; "
                    f"last lines of {self.log_path}:\n{tail(self.log_path)}"
                )
            try:
                if _http_get(self.url + "/health", timeout=2)[0] == 200:
                    return
            except ConnectionError:
                pass
            time.sleep(1.0)
        self.close()
        raise InfraError(
            f"vLLM server not healthy after {timeout_s:.0f}s; last lines of {self.log_path}:\n{tail(self.log_path)}"
        )

    def _failing(self) -> str:
        spec = self.plan.speculative
        return failing_checkpoint(self.log_path, self.plan.model, spec.draft if spec else None)

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "kind": "server",
            "model": self.plan.model,
            "engine_kwargs": self.plan.engine_kwargs,
            "env": self.plan.env,
            "workarounds": list(self.plan.workarounds),
            "log": str(self.log_path),
            "startup_s": getattr(self, "startup_s", None),
            "command": " ".join(self.command),
            "python": self.python,
        }

    @property
    def pid(self) -> int:
        """The server's process (its engine core runs as a child): what `harness soak` weighs."""
        return self._proc.pid

    def died(self) -> str | None:
        rc = self._proc.poll()
        if rc is None:
            return None
        return (
            f"vLLM server for {self.plan.model} exited with code {rc} in the middle of a cell (finished cells "
            f"are kept; rerun with --resume); last lines of {self.log_path}:\n{tail(self.log_path)}"
        )

    def close(self) -> None:
        proc = getattr(self, "_proc", None)
        if proc is not None:
            self._watchdog.kill()  # first: it ignores SIGTERM and would hold the group open
            self._watchdog.wait(10)
            # The whole group even when the server itself has exited: its EngineCore may not have.
            # Its results are in hand by now, so a server slow to shut down gets SIGKILL after
            # SERVER_GRACE_S rather than holding up a Ctrl-C'd or finished run.
            stop_group(proc.pid, grace_s=SERVER_GRACE_S)
            proc.wait(10)
        log = getattr(self, "_log", None)
        if log is not None and not log.closed:
            log.close()
