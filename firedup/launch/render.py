"""Render launch scripts from the engine templates (pure, apart from the optional `bash -n`).

Jinja2 runs with StrictUndefined (a typo in a template is an error, not an empty string) and
keep_trailing_newline; every value reaches the script through the `sh` filter (shlex.quote),
so a value is always exactly one shell word.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache, partial
from typing import TYPE_CHECKING, Any

from firedup.config.inventory import ArgValue, Deployment, HostSpec, Placement
from firedup.config.slots import gpu_env
from firedup.engine import Engine
from firedup.errors import RenderError
from firedup.launch.container import container_launch, device_gpus, inside_gpus
from firedup.launch.flags import VLLM_CLI, Spelling, spell
from firedup.node.runtime import OciRuntime, runtime_for

if TYPE_CHECKING:
    import jinja2

# Package data: top-level templates/ in the checkout, firedup/templates/ in a wheel (setup.py).
TEMPLATES_PACKAGE = "firedup.templates"
# The log classifier reads phase lines that SGLang prints only at info level or below.
VERBOSE_LEVELS = {"debug", "info"}


@dataclass(frozen=True)
class LaunchScript:
    text: str
    engine: Engine
    release: str = ""  # the engine release it was rendered for, as the header says
    assumed: bool = False  # no node said which release: the deployment's or the newest
    inner: str = ""  # in a container: the engine's script (engine.sh); `text` runs the container
    image: str | None = None  # in a container: the image it runs (the patched one, if any)

    @property
    def sha256(self) -> str:
        return hashlib.sha256((self.text + self.inner).encode()).hexdigest()


def _sh(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        raise RenderError(f"refusing to quote {value!r}: booleans and nulls are flags, not values")
    return shlex.quote(str(value))


@cache
def _environment() -> jinja2.Environment:
    import jinja2  # here, not at the top: `firedup status` and --help never render

    env = jinja2.Environment(
        loader=jinja2.PackageLoader(TEMPLATES_PACKAGE, "."),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # shell, not HTML: quoting is the `sh` filter's job
    )
    env.filters["sh"] = _sh
    return env


Flag = tuple[str, ...]


def flag_args(args: Mapping[str, ArgValue]) -> list[Flag]:
    """Inventory args to argv groups: true -> --flag, false -> omitted, list -> --flag v1 v2."""
    flags: list[Flag] = []
    for key, value in args.items():
        flag = f"--{key}"
        if value is True:
            flags.append((flag,))
        elif value is False:
            continue
        elif isinstance(value, list):
            dashed = [str(v) for v in value if str(v).startswith("-")]
            if dashed:
                raise RenderError(
                    f"args.{key}: list value {dashed[0]!r} starts with '-': the engine's parser "
                    "would read it as an option; pass it as a single value (--flag=value)"
                )
            flags.append((flag, *(str(v) for v in value)))
        elif str(value).startswith("-"):
            # `--flag -x` would make -x an option of its own: keep it the flag's value.
            flags.append((f"{flag}={value}",))
        else:
            flags.append((flag, str(value)))
    return flags


def engine_args(deployment: Deployment) -> list[Flag]:
    """The engine-specific arguments after model, host and port, one group per flag."""
    args = dict(deployment.args)
    if deployment.engine is Engine.SGLANG:
        level = str(args.pop("log-level", "info"))
        if level not in VERBOSE_LEVELS:
            raise RenderError(
                f"deployment {deployment.name}: args.log-level is {level!r}; firedup reads "
                "SGLang's phase lines, which appear only at 'info' or 'debug'"
            )
        if deployment.router is not None:
            # Behind a router the drain reads the in-flight gauges, served only with this flag.
            args.setdefault("enable-metrics", True)
        return [*flag_args(args), ("--log-level", level)]
    return flag_args(args)


def launch_env(
    host: HostSpec, deployment: Deployment, gpus: tuple[int, ...] | None = None
) -> dict[str, str]:
    """The launch environment: host env first, the deployment's wins on a clash; the long
    context knob becomes the engine's own env var (SGLang's or vLLM's); the GPU set (chosen
    on the node for `gpus: auto`, else the listed one) becomes CUDA_VISIBLE_DEVICES."""
    env = {**host.env, **deployment.env}
    chosen = gpus if gpus is not None else deployment.gpu_set
    if isinstance(chosen, tuple):
        env.update(gpu_env(chosen, env))
    if deployment.long_context == "allow" or deployment.draft_context == "extend":
        env[deployment.long_context_env] = "1"
    return env


def vllm_speculative_config(deployment: Deployment, spelling: Spelling) -> str | None:
    """vLLM takes speculative decoding as one JSON argument (--speculative-config), with
    vLLM's own method names (NEXTN is `mtp`, STANDALONE `draft_model`)."""
    spec = deployment.speculative
    if spec is None or spelling.vllm_method is None:
        return None
    config: dict[str, object] = {"method": spelling.vllm_method}
    if spec.draft_model:
        config["model"] = spec.draft_model
    if spec.num_steps:
        config["num_speculative_tokens"] = spec.num_steps
    if spec.draft_tp:
        config["draft_tensor_parallel_size"] = spec.draft_tp
    return json.dumps(config, separators=(",", ":"))


def render_launch(
    host: HostSpec,
    deployment: Deployment,
    *,
    run_id: str,
    rundir: str,
    placement: Placement | None = None,
    engine_version: str | None = None,
    gpus: tuple[int, ...] | None = None,
    image: str | None = None,
) -> LaunchScript:
    """The launch script for the engine release installed on the node (`engine_version`, as
    preflight read it), or for the deployment's assumed release when no node was asked; in a
    container (the host's or deployment's `runtime:`), the runtime's `run` of `image` (default:
    the inventory's) around it."""
    runtime = runtime_for(host, deployment)
    render = partial(
        engine_script,
        deployment=deployment,
        run_id=run_id,
        placement=placement,
        engine_version=engine_version,
    )
    if not isinstance(runtime, OciRuntime):
        return render(host, gpus=gpus)
    # In a container: the image's python, and only the deployment's env (the host's is the
    # node python's: its PATH and PYTHONPATH would break the image's); the GPUs it is given,
    # as the engine sees them there (numbered from 0).
    devices = device_gpus(runtime, host, deployment, gpus)
    inside = inside_gpus(devices) if devices is not None else gpus
    script = render(host.model_copy(update={"python": runtime.python, "env": {}}), gpus=inside)
    text = container_launch(
        runtime, host, deployment, run_id=run_id, rundir=rundir, image=image, gpus=devices
    )
    return replace(script, text=text, inner=script.text, image=image or runtime.image)


def engine_script(
    host: HostSpec,
    deployment: Deployment,
    *,
    run_id: str,
    placement: Placement | None = None,
    engine_version: str | None = None,
    gpus: tuple[int, ...] | None = None,
) -> LaunchScript:
    """The engine's own launch script (today's templates), wherever its python is."""
    spelling = spell(deployment, engine_version)
    context = {
        "host": host,
        "deployment": deployment,
        "run_id": run_id,
        "env": launch_env(host, deployment, gpus),
        "secret_names": sorted(deployment.secrets),
        "engine_args": engine_args(deployment),
        "speculative_config": vllm_speculative_config(deployment, spelling),
        "spelling": spelling,
        "cli_module": VLLM_CLI,
        "placement": placement,
        "master": placement.dist_init_addr.rsplit(":", 1) if placement else None,
    }
    import jinja2

    name = f"{deployment.engine.value}/launch.sh.j2"
    try:
        text = _environment().get_template(name).render(**context)
    except jinja2.TemplateNotFound:
        raise RenderError(
            f"no launch template for engine {deployment.engine.value}: {name}"
        ) from None
    except jinja2.UndefinedError as exc:
        raise RenderError(f"template {name}: {exc.message}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise RenderError(f"template {exc.filename}:{exc.lineno}: {exc.message}") from None
    return LaunchScript(
        text=text,
        engine=deployment.engine,
        release=spelling.release.version,
        assumed=spelling.assumed,
    )


def check_bash_syntax(script: LaunchScript) -> None:
    """`bash -n`: a rendered script that does not parse never reaches a node."""
    proc = subprocess.run(
        ["bash", "-n", "/dev/stdin"], input=script.text.encode(), capture_output=True, check=False
    )
    if proc.returncode != 0:
        raise RenderError(
            f"rendered launch script is not valid bash: {proc.stderr.decode().strip()}"
        )
