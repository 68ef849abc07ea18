"""Judging through a served or hosted model: `load_evaluator("api", model=NAME, base_url=URL)` and
`tpb score --evaluator api`. Any server that speaks the OpenAI-compatible chat completions protocol (vLLM's and
`transformers serve`'s OpenAI servers, TGI, Hugging Face Inference Providers, hosted APIs) is reached through
`huggingface_hub.AsyncInferenceClient`; without a base URL the model is routed by Inference Providers.

The question is PAE's, from the one prompt builder: the rubric as the system message, the image as a PNG data URL
at the same pixel budget, the poem and the answer format; temperature 0 and a fixed seed; the rubric's JSON schema as
the response format (huggingface_hub sends it to a base URL in TGI's form, `{"type": "json_object", "value":
SCHEMA}`, and to Inference Providers in OpenAI's). A server that refuses the response format (HTTP 400 or 422) is
asked again without it, once, and the results say so. The answer goes through the one parser.

An answer that does not parse gets one repair round (`repair=1`, `--repair 0` turns it off), as SemJudge's pipeline
does: the same conversation goes on with the model's answer and "Reply with the JSON object only, in the schema
above." The record keeps the first answer as `raw_output` and the second, its parse status and notes under `repair`;
scores read from the second are `repaired`, and the token counts are both requests'.

A batch's requests go out together, at most `concurrency` in flight. 429, 408, 5xx, timeouts and lost connections
are retried with exponential backoff and jitter, never sooner than a `Retry-After`, each retry logged; after the
last one the item is a `transient` failure, which a rerun tries again. A refused key (401, 403) stops the run at once.
The key is read from an environment variable when a batch starts, sent only as the bearer token, and redacted from
every message and record.

`HF_HUB_OFFLINE=1` makes huggingface_hub refuse every request, even to a loopback server (the check is a request
hook of its HTTP session). An offline cluster judging with its own server is a main use, so when the base URL's
host is loopback or private the client gets huggingface_hub's session without that hook; every other URL stays
refused, with a one-line error before anything runs.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import io
import ipaddress
import logging
import os
import random
import socket
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from urllib.parse import urlparse

from PIL import Image

from ...errors import RunStopped
from ...poems import Poem
from ..prompt import answer_schema, with_image_parts
from ...rubric import Rubric
from .base import TRANSIENT, EvalResult, Evaluator, ScoringItem, describe
from ...models import DEFAULT_MAX_PIXELS
from .pae import PAE, answer_length
from ..readout import check_readout, logprobs_result

logger = logging.getLogger(__name__)

DEFAULT_API_KEY_ENV = "HF_TOKEN"
DEFAULT_CONCURRENCY = 8
DEFAULT_TIMEOUT = 120.0  # seconds per request
DEFAULT_RETRIES = 5
BATCHES_PER_SLOT = 4  # a batch holds 4 × concurrency requests, so one slow answer idles few slots
SEED = 0
DEFAULT_REPAIR = 1  # repair rounds for an answer that does not parse
REPAIR_PROMPT = "Reply with the JSON object only, in the schema above."
MAX_RETRY_AFTER = 300.0  # a server asking for longer makes the item a transient failure, retried by a rerun
TOP_LOGPROBS = 20  # alternatives per answer token asked for with --readout expected (OpenAI's most)
NO_KEY = "EMPTY"  # what keyless OpenAI-compatible servers expect; never the saved Hugging Face token


class KeyRefused(RunStopped):
    """The server refused the API key (HTTP 401 or 403)."""


@dataclass
class Reply:
    """A served model's answer to one request, or why there is none (`error`, of `error_kind` transient or model);
    `format` is the response format sent with it, `refused` why none was, if the server refused one."""

    text: str
    usage: dict[str, int] | None
    served_model: str
    format: dict | None
    refused: str | None
    error: str | None = None
    error_kind: str | None = None
    logprobs: Any = None  # the answer's token log-probabilities, where they were asked for (`readout="expected"`)


def data_url(image: Image.Image) -> str:
    """A PNG data URL: lossless, so the server's model gets the pixels a local PAE would."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def wire_messages(messages: list[dict]) -> list[dict]:
    """The prompt builder's messages as the chat completions protocol has them: each image an `image_url` data URL,
    a text-only content (the rubric's system message) a plain string, which every server accepts."""
    wired = with_image_parts(messages, lambda image: {"type": "image_url", "image_url": {"url": data_url(image)}})
    for message in wired:
        parts = message["content"]
        if len(parts) == 1 and parts[0]["type"] == "text":
            message["content"] = parts[0]["text"]
    return wired


def repair_messages(messages: list[dict], answer: str) -> list[dict]:
    """The conversation of a repair round: the question, the model's answer, then the request for the JSON alone."""
    return [*messages, {"role": "assistant", "content": answer}, {"role": "user", "content": REPAIR_PROMPT}]


def response_format(rubric: Rubric, explain: bool = False) -> dict:
    """The rubric's answer schema (explain mode's with `explain`) as an OpenAI `response_format`."""
    return json_format("pae_answer", answer_schema(rubric, explain))


def json_format(name: str, schema: dict) -> dict:
    """A JSON schema as an OpenAI `response_format`."""
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """A `Retry-After` header in seconds: a number of seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def retry_delay(attempt: int, retry_after: float | None = None, base: float = 1.0, cap: float = 60.0,
                rng: random.Random | None = None) -> float:
    """Seconds before retry `attempt` (0 for the first): exponential backoff, min(cap, base · 2^attempt), with jitter
    (a uniform draw from its upper half, so that clients refused together do not return together), and never sooner
    than the server's Retry-After."""
    backoff = min(cap, base * 2 ** attempt) * (0.5 + (rng or random).random() / 2)
    return backoff if retry_after is None else max(backoff, retry_after)


def redact(text: str | None, secret: str | None) -> str | None:
    """`text` with every occurrence of the secret replaced by ***."""
    return text.replace(secret, "***") if text and secret else text


def is_internal_url(url: str) -> bool:
    """Whether every address of the URL's host is loopback, private or link-local: a server of this machine or of
    its own network, which an offline cluster may call."""
    host = urlparse(url).hostname
    if not host:
        return False
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    ips = [ipaddress.ip_address(a.split("%")[0]) for a in addresses]
    return bool(ips) and all(ip.is_loopback or ip.is_private or ip.is_link_local for ip in ips)


def http_status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def is_transient(exc: BaseException) -> bool:
    """What may pass on a retry: 408, 429, 5xx, a timeout, a lost or refused connection (httpx's and httpx2's
    `TransportError`: huggingface_hub 1.x uses the one, 2.x the other)."""
    status = http_status(exc)
    if status is not None:
        return status in (408, 429) or status >= 500
    return isinstance(exc, (TimeoutError, ConnectionError)) or any(
        cls.__name__ == "TransportError" for cls in type(exc).__mro__)


def run_coroutine(coroutine: Coroutine) -> Any:
    """Run a coroutine to the end from synchronous code, also where this thread already runs an event loop (a
    notebook, a Gradio handler): then in a thread of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def usage_line(prompt_tokens: int, completion_tokens: int, price_in: float | None = None,
               price_out: float | None = None) -> str:
    """Token totals, and their estimated cost where prices (USD per million tokens) are given."""
    line = f"tokens: {prompt_tokens:,} prompt + {completion_tokens:,} completion"
    if price_in is None and price_out is None:
        return line
    cost = (prompt_tokens * (price_in or 0.0) + completion_tokens * (price_out or 0.0)) / 1e6
    return line + (f"; estimated cost ${cost:,.4f} (at ${price_in or 0:g} in, ${price_out or 0:g} out per million "
                   "tokens)")


class APIJudge(PAE):
    """PAE's question asked of a served model. Nothing here holds a connection or the key, so data-loader workers get
    a plain copy: they encode the images while the requests of the previous batch are in flight."""

    name = "api"
    backend = "api"
    _model_attributes = ()

    def __init__(self, model: str, base_url: str | None = None, api_key_env: str = DEFAULT_API_KEY_ENV,
                 concurrency: int = DEFAULT_CONCURRENCY, timeout: float = DEFAULT_TIMEOUT,
                 retries: int = DEFAULT_RETRIES, max_pixels: int = DEFAULT_MAX_PIXELS,
                 max_new_tokens: int | None = None, rubric: Rubric | str | None = None,
                 structured: bool = True, backoff: float = 1.0, explain: str | None = None,
                 repair: int = DEFAULT_REPAIR, readout: str = "decode", top_logprobs: int = TOP_LOGPROBS):
        """`model` is the name the server knows (`--served-model-name`, a LoRA module's name, a provider's model id);
        `backoff` the first retry's delay in seconds; `structured=False` never asks for the response format;
        `repair` the repair rounds for an answer that does not parse (0 or 1)."""
        from huggingface_hub import constants

        Evaluator.__init__(self, rubric)
        if not model:
            raise ValueError("the api evaluator needs --model: the model name the server knows")
        if base_url is not None and urlparse(base_url).scheme not in ("http", "https"):
            raise ValueError(f"--base-url {base_url!r} is not an http:// or https:// URL")
        if concurrency < 1 or retries < 0 or timeout <= 0:
            raise ValueError("--concurrency must be at least 1, --retries at least 0 and --timeout above 0")
        self.offline_local = constants.is_offline_mode()
        if self.offline_local and (base_url is None or not is_internal_url(base_url)):
            where = f"{base_url} is not a loopback or private address" if base_url else "no --base-url was given"
            raise ValueError(f"HF_HUB_OFFLINE is set and {where}: judge with a server of this machine or network, "
                             "or unset HF_HUB_OFFLINE")
        self.model_name, self.base_url, self.api_key_env = model, base_url, api_key_env
        self.concurrency, self.timeout, self.retries, self.backoff = concurrency, timeout, retries, backoff
        self.max_pixels, self.max_new_tokens = max_pixels, answer_length(max_new_tokens, explain)
        self.explain = explain
        if repair not in (0, 1):
            raise ValueError(f"--repair must be 0 (off) or 1 (one repair round), not {repair!r}")
        self.repair = repair
        self.min_batch_size = BATCHES_PER_SLOT * concurrency
        self.refused_format: str | None = None if structured else "not asked"  # why no response format is sent
        self.readout, self.top_logprobs = check_readout(readout), top_logprobs  # expected: from the logprobs

    @property
    def where(self) -> str:
        return self.base_url or "Hugging Face Inference Providers"

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "temperature": 0.0, "seed": SEED, "repair": self.repair}

    def _prepare(self, items: Sequence[ScoringItem]) -> list[list[dict]]:
        return [wire_messages(self.messages(it)) for it in items]

    def _run(self, inputs: list[list[dict]], items: Sequence[ScoringItem]) -> list[EvalResult]:
        return run_coroutine(self._judge(inputs, items))

    async def _judge(self, inputs: list[list[dict]], items: Sequence[ScoringItem]) -> list[EvalResult]:
        return await self.each(len(items), lambda client, slots, stopped, key, i: self._ask(
            client, slots, stopped, inputs[i], items[i], key))

    async def each(self, n: int, ask: Callable[..., Awaitable[Any]]) -> list[Any]:
        """`ask(client, slots, stopped, key, i)` for i in range(n), concurrently, under one client, this judge's
        concurrency slots and its key; a refused key (`RunStopped`) cancels the rest and is raised."""
        key = os.environ.get(self.api_key_env) or None
        async with self._client(key) as client:
            slots, stopped = asyncio.Semaphore(self.concurrency), asyncio.Event()
            tasks = [asyncio.ensure_future(ask(client, slots, stopped, key, i)) for i in range(n)]
            try:
                return list(await asyncio.gather(*tasks))
            except RunStopped:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise

    @asynccontextmanager
    async def _client(self, key: str | None) -> AsyncIterator[Any]:
        from huggingface_hub import AsyncInferenceClient, get_async_session
        from huggingface_hub.utils._http import async_hf_request_event_hook

        # A base URL never gets the saved Hugging Face token by default: a keyless server gets NO_KEY.
        client = AsyncInferenceClient(base_url=self.base_url, api_key=key or (NO_KEY if self.base_url else None),
                                      timeout=self.timeout)
        async with client:
            if self.offline_local:
                session = get_async_session()
                session.event_hooks = {**session.event_hooks, "request": [
                    hook for hook in session.event_hooks["request"] if hook is not async_hf_request_event_hook]}
                # The client's HTTP session is made on first use: given here, it is the one without the offline hook.
                client._async_client = await client.exit_stack.enter_async_context(session)
            yield client

    async def _ask(self, client, slots: asyncio.Semaphore, stopped: asyncio.Event, messages: list[dict],
                   item: ScoringItem, key: str | None) -> EvalResult | None:
        fmt = self.response_format(item)
        async with slots:
            reply = await self.request(client, stopped, messages, fmt, key, item.image_id)
            if reply is None:
                return None  # the batch is given up: its results are never used
            result = self._reply_result(item, reply, key)
            if result.parse_status != "failed" or reply.error is not None or not self.repair:
                return result
            again = await self.request(client, stopped, repair_messages(messages, reply.text), fmt, key, item.image_id)
        return None if again is None else self._repaired(item, result, again, key)

    def response_format(self, item: ScoringItem) -> dict:
        """The response format asked for with an item's question: its rubric's answer schema (explain mode's with
        --explain). The pairwise judge asks for its own."""
        return response_format(self.rubric_for(item), bool(self.explain))

    def _reply_result(self, item: ScoringItem, reply: Reply, key: str | None) -> EvalResult:
        if reply.error is not None:
            failed = self.result(item, {}, None, None, "failed", reply.error, kind=reply.error_kind)
            return self._record(failed, reply.format, reply.refused)
        result = self.answer_result(item, reply.text)
        if self.readout == "expected":
            result = logprobs_result(self, item, result, reply.logprobs)
        result.raw_output = redact(result.raw_output, key)
        result.usage = reply.usage
        result.settings["served_model"] = reply.served_model
        return self._record(result, reply.format, reply.refused)

    def _repaired(self, item: ScoringItem, first: EvalResult, again: Reply, key: str | None) -> EvalResult:
        """The result after a repair round: the second answer's scores where it parsed (`repaired`), else the first
        answer's failure; both answers and both requests' tokens recorded."""
        if again.error is not None:  # the repair request itself failed
            first.repair = {"raw_output": None, "parse_status": "failed", "error": again.error}
            first.error = f"{first.error}; the repair request failed: {again.error}"
            return first
        second = self._reply_result(item, again, key)
        first.repair = {"raw_output": second.raw_output, "parse_status": second.parse_status, "error": second.error}
        if first.usage or second.usage:
            first.usage = {k: (first.usage or {}).get(k, 0) + (second.usage or {}).get(k, 0)
                           for k in ("prompt_tokens", "completion_tokens")}
        if second.parse_status == "failed":
            first.error = f"{first.error}; asked again, the second answer did not parse either: {second.error}"
            return first
        second.raw_output, second.repair, second.usage = first.raw_output, first.repair, first.usage
        second.parse_status = "repaired"
        second.error = f"the first answer did not parse ({first.error}); scores from the repair round" + (
            f": {second.error}" if second.error else "")
        return second

    async def request(self, client, stopped: asyncio.Event, messages: list[dict], fmt: dict | None, key: str | None,
                      label: str) -> "Reply | None":
        """One chat completion under this judge's policy: the response format `fmt` unless the server refused one
        (then once more without it), retries of what is transient, a refused key stopping every request. None when
        the run was stopped before an answer."""
        refused_now = None
        attempt = 0
        while not stopped.is_set():  # a refused key stops every request not yet sent
            sent = None if self.refused_format or refused_now else fmt
            try:
                logprobs = {"logprobs": True, "top_logprobs": self.top_logprobs} if self.readout == "expected" else {}
                out = await client.chat_completion(messages, model=self.model_name, max_tokens=self.max_new_tokens,
                                                   temperature=0.0, seed=SEED, response_format=sent, **logprobs)
                break
            except Exception as exc:
                status = http_status(exc)
                message = redact(self._describe(exc), key)
                if status in (401, 403):
                    stopped.set()
                    raise KeyRefused(f"{self.where} refused the API key from ${self.api_key_env} (HTTP {status}): "
                                     f"set {self.api_key_env} to a valid key, or --api-key-env to the variable "
                                     "that holds one; nothing was written for this batch") from None
                if sent is not None and status in (400, 422):
                    refused_now = message
                    logger.warning("%s: %s, to a request with a response format: asking once more without it",
                                   label, message)
                    continue
                delay = self._next_delay(exc, attempt)
                if delay is None:
                    if attempt:
                        message += f" ({attempt + 1} attempts)"
                    kind = TRANSIENT if is_transient(exc) else "model"
                    return Reply("", None, "", sent, refused_now, message, kind)
                attempt += 1
                logger.warning("%s: retry %d of %d in %.1f s: %s", label, attempt, self.retries, delay, message)
                await asyncio.sleep(delay)
        else:
            return None
        if refused_now and not self.refused_format:
            self.refused_format = refused_now  # the server answered without it: stop asking for this run
        answer = (out.choices[0].message.content or "") if out.choices else ""
        usage = None if out.usage is None else {"prompt_tokens": int(out.usage.prompt_tokens or 0),
                                                "completion_tokens": int(out.usage.completion_tokens or 0)}
        return Reply(redact(answer, key), usage, out.model, sent, refused_now,
                     logprobs=out.choices[0].logprobs if out.choices else None)

    def _next_delay(self, exc: BaseException, attempt: int) -> float | None:
        """Seconds to wait before trying again, or None to give up: not transient, retries spent, or a server asking
        to wait longer than MAX_RETRY_AFTER."""
        if not is_transient(exc) or attempt >= self.retries:
            return None
        after = retry_after_seconds(getattr(getattr(exc, "response", None), "headers", {}).get("Retry-After"))
        return None if after is not None and after > MAX_RETRY_AFTER else retry_delay(attempt, after, self.backoff)

    def _record(self, result: EvalResult, fmt: dict | None, refused_now: str | None) -> EvalResult:
        """The record says whether the answer was constrained to the rubric's schema, and if not, why."""
        refused = refused_now or self.refused_format
        result.settings["response_format"] = "json_schema" if fmt else f"none ({refused})"
        return result

    def _describe(self, exc: BaseException) -> str:
        status = http_status(exc)
        if status is None:
            return describe(exc)
        body = " ".join(exc.response.text.split())[:300]
        return f"HTTP {status} from {self.where}" + (f": {body}" if body else "")


def served_reward(model: str, base_url: str | None = None, missing: float = 0.0,
                  **kwargs) -> Callable[[Sequence[Image.Image], Sequence[Poem | Mapping[str, str]]], list[float]]:
    """A reward function for training an image generator against a served judge (PAE behind `vllm serve`, say):
    images and their poems in, one float per image out, its quality (the mean of the rubric's scores, in [0, 1]), or
    `missing` where the answer gave none. The judge is built once; `kwargs` go to `APIJudge`. The per-dimension
    scores are in `reward.judge(images, poems)`."""
    judge = APIJudge(model, base_url=base_url, **kwargs)

    def reward(images: Sequence[Image.Image], poems: Sequence[Poem | Mapping[str, str]]) -> list[float]:
        results = judge(images, poems, batch_size=max(len(images), 1))
        return [missing if r.quality is None else r.quality for r in results]

    reward.judge = judge
    return reward
