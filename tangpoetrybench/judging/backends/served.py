"""The served backend: any server that speaks the OpenAI-compatible chat completions protocol (vLLM's and
`transformers serve`'s OpenAI servers, TGI, a fleet of replicas, Hugging Face Inference Providers through
`https://router.huggingface.co/v1` when no base URL is given), over `httpx2` (huggingface_hub's HTTP client).

A question goes out as the prompt builder's messages, each image a PNG data URL (lossless, so the server's model gets
the pixels a local one would; an image its processor would refuse fails at once, unsent), at temperature 0 and a
fixed seed, with its JSON schema as the response format (OpenAI's `json_schema` form). A server that refuses the
response format (HTTP 400 or 422) is asked again without it, once, and the records say so.

What this client promises (docs/security.md):
- **The key** is read from an environment variable when a batch starts, sent only as the bearer token, and redacted
  from every message and record. Which variable: `api_key_env` when given; else `HF_TOKEN` (or the saved Hugging
  Face token) for Hugging Face's own inference hosts only (`HF_INFERENCE_HOSTS`, `*.endpoints.huggingface.cloud`;
  never a `*.hf.space` Space, which runs its owner's code); any other server gets no key (`EMPTY`, what keyless
  OpenAI-compatible servers expect). Credentials written into a URL (`https://user:key@host`) are refused.
- **Where requests go**: to the URLs given, never elsewhere: a redirect is not followed (a redirected request is a
  failure that names the target). With `HF_HUB_OFFLINE=1` only loopback and private hosts may be named.
- **Bounds**: each attempt has a total deadline (`timeout`, however slowly the server sends), each response body a
  size bound (a real answer is a few kB; `max_new_tokens` says how many tokens; a model list MAX_MODELS_BODY), every
  text of the server's kept in a record or a message a length bound, retries are bounded (`retries`,
  exponential backoff with jitter, never sooner than a `Retry-After`, never waiting longer than MAX_RETRY_AFTER).
  A response over its bound is a failed record that says why.
- **Failures**: 429, 408, 5xx, a 200 whose body is an error object, timeouts and lost connections are transient
  (retried, then a `transient` failure that a rerun tries again); a refused key (401, 403) stops the run at once; a
  model the server does not serve stops the run, naming the models it does serve.

Several base URLs make a fleet: each request goes to the replica with the fewest requests in flight; a replica that
refuses connections or fails is taken out for a cool-down (`cooldown` seconds, doubled while it keeps failing),
and rejoins once its health check (`GET /health`) answers.

A call may have a deadline of its own, over all its requests and their retries (`with backend.within(seconds):`, what
a reward call sets): a question not answered by then is a transient failure that says so, and the call returns.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import io
import json
import logging
import os
import random
import time
from contextlib import contextmanager
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Coroutine, Iterator, Sequence
from urllib.parse import urlparse

from PIL import Image

from ...errors import RunStopped
from ...files import check_offline
from ...models import image_refusal
from ..prompt import with_image_parts
from . import Answer, Backend, Question

logger = logging.getLogger(__name__)

HF_ROUTER = "https://router.huggingface.co/v1"  # Inference Providers, OpenAI-compatible
# Hugging Face's own inference hosts, where a Hugging Face token goes unasked (HTTPS only): Inference Providers' router,
# the serverless API, and dedicated Inference Endpoints (`*.endpoints.huggingface.cloud`). Not the Hub's other hosts,
# and never a Space (`*.hf.space` runs its owner's code): a token goes there only when named (`--api-key-env`).
HF_INFERENCE_HOSTS = ("router.huggingface.co", "api-inference.huggingface.co")
HF_ENDPOINTS_DOMAIN = "endpoints.huggingface.cloud"
DEFAULT_CONCURRENCY = 8  # requests in flight per replica
DEFAULT_TIMEOUT = 120.0  # seconds an attempt may take, whole
DEFAULT_RETRIES = 5
DEFAULT_COOLDOWN = 5.0  # seconds a failing replica is left out, at first
MAX_COOLDOWN = 120.0
HEALTH_TIMEOUT = 5.0
SEED = 0
MAX_RETRY_AFTER = 300.0  # a server asking for longer makes the item a transient failure, retried by a rerun
TOP_LOGPROBS = 20  # alternatives per answer token asked for with the readout (OpenAI's most)
NO_KEY = "EMPTY"  # what keyless OpenAI-compatible servers expect; never the saved Hugging Face token
BODY_BASE = 64 * 1024  # bytes of a response besides its tokens
BODY_PER_TOKEN = 64  # bytes per answer token
BODY_PER_TOKEN_LOGPROBS = 48 * (TOP_LOGPROBS + 1)  # with the top alternatives of every token
MAX_ERROR_TEXT = 300  # characters of a server's error message (or a redirect's target) kept
MAX_MODELS_BODY = 1024 * 1024  # bytes of a server's model list read (a few kB; hundreds of LoRA modules fit)
MAX_LISTED = 20  # models of that list named in a message
MAX_NAME_TEXT = 200  # characters of a model name the server gives (in a record, or listed in a message) kept


class KeyRefused(RunStopped):
    """The server refused the API key (HTTP 401 or 403)."""


class ModelUnknown(RunStopped):
    """The server does not serve the model asked for."""


class ServerFailure(Exception):
    """One attempt failed: an HTTP status, a body that is not an answer, a redirect, a body over its bound."""

    def __init__(self, message: str, status: int | None = None, transient: bool = False,
                 retry_after: float | None = None, body: str = ""):
        super().__init__(message)
        self.status, self.transient, self.retry_after, self.body = status, transient, retry_after, body


def data_url(image: Image.Image) -> str:
    """A PNG data URL: lossless, so the server's model gets the pixels a local model would. An image the local
    path's processor would refuse (`models.image_refusal`) is refused here too, before anything is sent: the item
    fails as `input`, at once, where the server would answer HTTP 500 to every retry."""
    refusal = image_refusal(image.size)
    if refusal:
        raise ValueError(refusal)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def wire_messages(messages: list[dict]) -> list[dict]:
    """The prompt builder's messages as the chat completions protocol has them: each image an `image_url` data URL,
    a text-only content (a system message) a plain string, which every server accepts."""
    wired = with_image_parts(messages, lambda image: {"type": "image_url", "image_url": {"url": data_url(image)}})
    for message in wired:
        parts = message["content"]
        if isinstance(parts, list) and len(parts) == 1 and parts[0]["type"] == "text":
            message["content"] = parts[0]["text"]
    return wired


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


def is_hf_host(url: str) -> bool:
    """Whether the URL is one of Hugging Face's own inference hosts, over HTTPS (a Hugging Face token goes there
    unasked, and nowhere else)."""
    host = (urlparse(url).hostname or "").lower()
    return urlparse(url).scheme == "https" and (host in HF_INFERENCE_HOSTS
                                                or host.endswith("." + HF_ENDPOINTS_DOMAIN))


def server_text(text: Any, secret: str | None, limit: int = MAX_ERROR_TEXT) -> str:
    """A text a server chose (a model name, a redirect's target), as a record or a message may keep it: the key
    redacted first (a cut could leave part of it), then on one line and cut to `limit` characters."""
    text = " ".join(redact(str(text), secret).split())
    return text if len(text) <= limit else text[:limit] + "..."


def listed_models(names: Sequence[str], secret: str | None) -> str:
    """A server's models as a message names them: the first MAX_LISTED, each quoted, redacted and cut, then a
    count."""
    shown = ", ".join(repr(server_text(n, secret, MAX_NAME_TEXT)) for n in names[:MAX_LISTED])
    return shown + (f" and {len(names) - MAX_LISTED:,} more" if len(names) > MAX_LISTED else "")


async def read_bounded(client, method: str, url: str, bound: int, seconds: float, why: str = "",
                       **kwargs) -> tuple[Any, bytes]:
    """A response and its body, read within `seconds` in all (however slowly the server sends) and up to `bound`
    bytes: a body over it is a ServerFailure, not read further. `why` says where the bound comes from."""
    async def read() -> tuple[Any, bytes]:
        async with client.stream(method, url, **kwargs) as response:
            data = bytearray()
            async for chunk in response.aiter_bytes():
                data += chunk
                if len(data) > bound:
                    raise ServerFailure(f"a response from {url} over {bound:,} bytes{why}, "
                                        "not read further")
            return response, bytes(data)

    return await asyncio.wait_for(read(), seconds)


def checked_url(url: str) -> str:
    """A base URL as given, refused where it is not http(s) or carries credentials."""
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"--base-url {url!r} is not an http:// or https:// URL")
    if parsed.username is not None or parsed.password is not None:
        shown = parsed._replace(netloc=parsed.hostname + (f":{parsed.port}" if parsed.port else "")).geturl()
        raise ValueError(f"--base-url {shown} carries credentials in the URL: put the key in an environment variable "
                         "and name it with --api-key-env NAME (the URL is stored in the records; the key never is)")
    return url.rstrip("/")


def base_urls(base_url: str | Sequence[str] | None) -> list[str]:
    """The replicas' URLs: one URL, a comma-separated list, or a list of them; Inference Providers when none."""
    if base_url is None:
        return [HF_ROUTER]
    given = [base_url] if isinstance(base_url, str) else list(base_url)
    urls = [checked_url(u.strip()) for part in given for u in part.split(",") if u.strip()]
    if not urls:
        raise ValueError("--base-url is empty")
    if len(set(urls)) != len(urls):
        raise ValueError(f"--base-url names a server twice: {', '.join(urls)}")
    return urls


def run_coroutine(coroutine: Coroutine) -> Any:
    """Run a coroutine to its end, also from code that is itself inside an event loop (a Gradio handler)."""
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


def is_transient(exc: BaseException) -> bool:
    """What may pass on a retry: a transient server failure, a timeout, a lost or refused connection."""
    if isinstance(exc, ServerFailure):
        return exc.transient
    return isinstance(exc, (TimeoutError, ConnectionError)) or any(
        cls.__name__ in ("TransportError", "TimeoutException") for cls in type(exc).__mro__)


def describe(exc: BaseException) -> str:
    message = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {message[0][:500]}" if message else type(exc).__name__


@dataclass
class Replica:
    """One server of the fleet: its requests in flight, and until when it is left out."""

    url: str
    in_flight: int = 0
    down_until: float = 0.0
    failures: int = 0  # in a row
    checking: bool = False  # its health check is under way: the other requests go elsewhere meanwhile

    def fail(self, fleet: int) -> None:
        """Left out for a cool-down, doubled while it keeps failing; a lone server is never left out (its requests
        back off instead)."""
        self.failures += 1
        if fleet > 1:
            self.down_until = time.monotonic() + min(MAX_COOLDOWN, DEFAULT_COOLDOWN * 2 ** (self.failures - 1))

    def succeed(self) -> None:
        self.failures, self.down_until = 0, 0.0


class ServedBackend(Backend):
    """The served backend (see the module's docstring). Nothing here holds a connection or the key, so data-loader
    workers get a plain copy: they encode the images while the previous batch's requests are in flight."""

    name = "api"
    served, default_repair = True, 1  # an answer that does not read is asked again, by default
    random_weights = None  # nobody can vouch for a served model's weights

    def __init__(self, model: str | None = None, base_url: str | Sequence[str] | None = None,
                 api_key_env: str | None = None, concurrency: int = DEFAULT_CONCURRENCY, timeout: float = DEFAULT_TIMEOUT,
                 retries: int = DEFAULT_RETRIES, backoff: float = 1.0, structured: bool = True):
        """`model` is the name the server knows (`--served-model-name`, a LoRA module's name, a provider's model id);
        `backoff` the first retry's delay in seconds; `structured=False` never asks for the response format."""
        from huggingface_hub import constants

        if not model:
            raise ValueError("a served judge needs --model: the model name the server knows")
        if concurrency < 1 or retries < 0 or timeout <= 0:
            raise ValueError("--concurrency must be at least 1, --retries at least 0 and --timeout above 0")
        self.urls = base_urls(base_url)
        self.offline = constants.is_offline_mode()
        check_offline(self.urls, "judge with a server of this machine or network",
                      None if base_url else "no --base-url was given")
        self.model_name, self.api_key_env = model, api_key_env
        self.concurrency, self.timeout, self.retries, self.backoff = concurrency, timeout, retries, backoff
        self.min_batch_size = 4 * concurrency * len(self.urls)  # so that one slow answer idles few slots
        self.refused_format: str | None = None if structured else "not asked"  # why no response format is sent
        self.replicas = [Replica(u) for u in self.urls]
        self.listed: list[str] | None = None  # the models the server lists, once asked
        self.deadline: tuple[float, float] | None = None  # (seconds, time.monotonic() by when) of a call, see `within`

    @property
    def where(self) -> str:
        return ", ".join(self.urls) if self.urls != [HF_ROUTER] else "Hugging Face Inference Providers"

    def __getstate__(self) -> dict:
        return dict(self.__dict__)

    def settings(self) -> dict[str, Any]:
        return {"temperature": 0.0, "seed": SEED}

    def key(self) -> str | None:
        """The key for this batch (see the module's docstring): None where the servers get no key."""
        if self.api_key_env:
            return os.environ.get(self.api_key_env) or None
        if all(is_hf_host(u) for u in self.urls):
            from huggingface_hub import get_token

            return get_token()
        return None

    @contextmanager
    def within(self, seconds: float | None) -> Iterator[None]:
        """Every question asked inside the block answered within `seconds` of its start, retries included, or a
        transient failure that says so (None: no deadline but each attempt's)."""
        if seconds is not None and seconds <= 0:
            raise ValueError(f"a deadline must be above 0 seconds, not {seconds!r}")
        previous = self.deadline
        self.deadline = None if seconds is None else (seconds, time.monotonic() + seconds)
        try:
            yield
        finally:
            self.deadline = previous

    def prepare(self, questions: Sequence[Question]) -> list[list[dict]]:
        return [wire_messages(q.messages) for q in questions]

    def answer(self, prepared: list[list[dict]], questions: Sequence[Question]) -> list[Answer]:
        return run_coroutine(self._answer_all(prepared, questions))

    async def _answer_all(self, prepared: list[list[dict]], questions: Sequence[Question]) -> list[Answer]:
        import httpx2

        key = self.key()
        limits = httpx2.Limits(max_connections=self.concurrency * len(self.urls))
        async with httpx2.AsyncClient(follow_redirects=False, timeout=self.timeout, limits=limits,
                                      trust_env=False) as client:
            slots, stopped = asyncio.Semaphore(self.concurrency * len(self.urls)), asyncio.Event()

            async def one(i: int) -> Answer:
                async with slots:
                    return await self.request(client, stopped, prepared[i], questions[i], key, f"request {i}")

            tasks = [asyncio.ensure_future(one(i)) for i in range(len(questions))]
            try:
                if self.deadline is None:
                    return list(await asyncio.gather(*tasks))
                seconds, by = self.deadline
                done, late = await asyncio.wait(tasks, timeout=max(0.0, by - time.monotonic()))
                for task in late:
                    task.cancel()
                await asyncio.gather(*late, return_exceptions=True)
                return [task.result() if task in done else Answer(
                    error=f"no answer within the call's deadline of {seconds:g} s", error_kind="transient",
                    meta=self._format(questions[i].schema is not None and not self.refused_format, None))
                    for i, task in enumerate(tasks)]
            except RunStopped:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise

    async def request(self, client, stopped: asyncio.Event, messages: list[dict], question: Question,
                      key: str | None, label: str) -> Answer:
        """One question under this backend's policy (see the module's docstring)."""
        refused_now, attempt = None, 0
        logprobs = question.anchors is not None
        while True:
            if stopped.is_set():
                raise RunStopped("stopped: another request was refused")
            asked = question.schema is not None and not (self.refused_format or refused_now)
            payload = {"model": self.model_name, "messages": messages, "max_tokens": question.max_new_tokens,
                       "temperature": 0.0, "seed": SEED, "stream": False,
                       **({"response_format": json_format(question.schema_name, question.schema)} if asked else {}),
                       **({"logprobs": True, "top_logprobs": TOP_LOGPROBS} if logprobs else {})}
            try:
                body, server = await self._attempt(client, stopped, payload, key, question.max_new_tokens, logprobs)
                break
            except ServerFailure as exc:
                if asked and exc.status in (400, 422):
                    refused_now = redact(f"{exc}: {exc.body}" if exc.body else str(exc), key)
                    logger.warning("%s: %s, to a request with a response format: asking once more without it",
                                   label, refused_now)
                    continue
                failure = exc
            except (RunStopped, asyncio.CancelledError):
                raise
            except Exception as exc:  # a timeout, a refused or lost connection, no replica up
                failure = exc
            message = redact(failure.args[0] if isinstance(failure, ServerFailure) and failure.args else
                             describe(failure), key)
            if isinstance(failure, ServerFailure) and failure.body:
                message += f": {redact(failure.body, key)}"
            delay = self._next_delay(failure, attempt)
            if delay is None:
                if attempt:
                    message += f" ({attempt + 1} attempts)"
                return Answer(error=message, error_kind="transient" if is_transient(failure) else "model",
                              meta=self._format(asked, refused_now))
            attempt += 1
            logger.warning("%s: retry %d of %d in %.1f s: %s", label, attempt, self.retries, delay, message)
            await asyncio.sleep(delay)
        if refused_now and not self.refused_format:
            self.refused_format = refused_now  # the server answered without it: stop asking for this run
        choice = (body.get("choices") or [{}])[0]
        text = (choice.get("message") or {}).get("content") or ""
        usage = body.get("usage")
        if isinstance(usage, dict):
            usage = {k: int(usage.get(k) or 0) for k in ("prompt_tokens", "completion_tokens")}
        meta = {"served_model": server_text(body.get("model", ""), key, MAX_NAME_TEXT), "server": server,
                **self._format(asked, refused_now)}
        return Answer(redact(text, key), usage if isinstance(usage, dict) else None, logprobs=choice.get("logprobs"),
                      meta=meta)

    async def _attempt(self, client, stopped: asyncio.Event, payload: dict, key: str | None, max_new_tokens: int,
                       logprobs: bool) -> tuple[dict, str]:
        """One attempt on the replica chosen for it: its body and the replica's URL, or the failure raised (a refused
        key and an unknown model stop every request)."""
        replica = await self._replica(time.monotonic() + self.timeout)
        try:
            body = await self._post(client, replica, payload, key, max_new_tokens, logprobs)
        except ServerFailure as exc:
            if exc.status in (401, 403):
                stopped.set()
                raise KeyRefused(f"{self.where} refused the API key{self._key_source()} (HTTP {exc.status}): set a "
                                 "valid key, or --api-key-env to the variable that holds one; nothing was written for "
                                 "this batch") from None
            if exc.status in (400, 404, 422) and await self._model_unknown(client, replica, key):
                stopped.set()
                raise ModelUnknown(f"the server at {replica.url} does not know model {self.model_name!r}; it serves: "
                                   f"{listed_models(self.listed, key)} (give one of them as --model)") from None
            if exc.transient and (exc.status is None or exc.status >= 500):
                replica.fail(len(self.replicas))
            raise
        except (RunStopped, asyncio.CancelledError):
            raise
        except Exception as exc:
            if not is_transient(exc):
                raise
            replica.fail(len(self.replicas))
            raise ServerFailure(f"{describe(exc)} ({replica.url})", transient=True) from exc  # which replica failed
        finally:
            replica.in_flight -= 1
        replica.succeed()
        return body, replica.url

    def _format(self, asked: bool, refused_now: str | None) -> dict[str, str]:
        """What the answer was constrained to: the schema, or why not."""
        refused = refused_now or self.refused_format
        return {"response_format": "json_schema" if asked else f"none ({refused})" if refused else "none"}

    def _key_source(self) -> str:
        return f" from ${self.api_key_env}" if self.api_key_env else ""

    async def _replica(self, deadline: float) -> Replica:
        """The replica with the fewest requests in flight among those not left out; when every one is left out, the
        first to come back, once its health check answers; a TimeoutError when none is up by `deadline`."""
        while True:
            now = time.monotonic()
            up = [r for r in self.replicas if r.down_until <= now and not r.checking]
            if up:
                chosen = min(up, key=lambda r: r.in_flight)
                if chosen.down_until:  # back from its cool-down: one request checks it, the others go elsewhere
                    chosen.checking = True
                    try:
                        healthy = await self._healthy(chosen)
                    finally:
                        chosen.checking = False
                    if not healthy:
                        chosen.fail(len(self.replicas))
                        continue
                    chosen.down_until = 0.0
                chosen.in_flight += 1
                return chosen
            wake = min(r.down_until for r in self.replicas)
            if wake > deadline or now > deadline:
                raise TimeoutError(f"no server of {self.where} was up (each failed and is left out for a while)")
            await asyncio.sleep(max(0.05, wake - now))

    async def _healthy(self, replica: Replica) -> bool:
        """Whether a replica that failed answers its health check (`GET /health` at the server's root, or its
        `/models` where it has no /health) within HEALTH_TIMEOUT; only the status is read, never the body."""
        import httpx2

        root = replica.url[:-3] if replica.url.endswith("/v1") else replica.url

        async def check(client, url: str) -> bool:
            async with client.stream("GET", url) as response:
                return response.status_code == 200

        try:
            async with httpx2.AsyncClient(follow_redirects=False, timeout=HEALTH_TIMEOUT, trust_env=False) as client:
                for url in (root + "/health", replica.url + "/models"):
                    if await asyncio.wait_for(check(client, url), HEALTH_TIMEOUT):
                        return True
        except Exception:
            return False
        return False

    async def _post(self, client, replica: Replica, payload: dict, key: str | None, max_new_tokens: int,
                    logprobs: bool) -> dict:
        """One attempt: the chat completion's JSON body, read within the deadline and the size bound."""
        bound = BODY_BASE + max_new_tokens * (BODY_PER_TOKEN_LOGPROBS if logprobs else BODY_PER_TOKEN)
        headers = {"Authorization": f"Bearer {key or NO_KEY}", "Content-Type": "application/json"}
        response, data = await read_bounded(client, "POST", replica.url + "/chat/completions", bound, self.timeout,
                                            f" (the bound for {max_new_tokens} tokens)", json=payload,
                                            headers=headers)
        status = response.status_code
        text = server_text(data.decode("utf-8", "replace"), key)
        if 300 <= status < 400:
            target = server_text(response.headers.get("location", "?"), key)
            raise ServerFailure(f"HTTP {status} from {replica.url}, a redirect to {target!r}, not followed "
                                "(a request goes only to the server it names)", status)
        if status != 200:
            raise ServerFailure(f"HTTP {status} from {replica.url}", status, status in (408, 429) or status >= 500,
                                retry_after_seconds(response.headers.get("retry-after")), text)
        try:
            body = json.loads(bytes(data))
        except ValueError:
            raise ServerFailure(f"HTTP 200 from {replica.url} with a body that is not JSON", status, True,
                                body=text) from None
        if not isinstance(body, dict) or (body.get("error") and not body.get("choices")):
            error = body.get("error") if isinstance(body, dict) else body
            message = error.get("message", error) if isinstance(error, dict) else error
            raise ServerFailure(f"HTTP 200 from {replica.url} with an error instead of an answer", status, True,
                                body=server_text(message, key))
        return body

    async def _model_unknown(self, client, replica: Replica, key: str | None) -> bool:
        """Whether the server lists its models and ours is not among them (asked once; a list over MAX_MODELS_BODY
        bytes, or not one, says nothing)."""
        if self.listed is None:
            try:
                headers = {"Authorization": f"Bearer {key or NO_KEY}"}
                response, data = await read_bounded(client, "GET", replica.url + "/models", MAX_MODELS_BODY,
                                                    HEALTH_TIMEOUT, headers=headers)
                listed = json.loads(data).get("data") if response.status_code == 200 else None
                self.listed = [str(m.get("id")) for m in listed if isinstance(m, dict)] if isinstance(listed, list) \
                    else []
            except Exception:
                self.listed = []
        return bool(self.listed) and self.model_name not in self.listed

    def _next_delay(self, exc: BaseException, attempt: int) -> float | None:
        """Seconds to wait before trying again, or None to give up: not transient, retries spent, or a server asking
        to wait longer than MAX_RETRY_AFTER."""
        if not is_transient(exc) or attempt >= self.retries:
            return None
        after = getattr(exc, "retry_after", None)
        return None if after is not None and after > MAX_RETRY_AFTER else retry_delay(attempt, after, self.backoff)
