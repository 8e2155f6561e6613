"""LangChain and LangGraph (``langchain_core``): every ``BaseTool``, hooked at ``_run`` /
``_arun``, the tool's own code.

``BaseTool.run`` / ``arun`` (behind ``invoke``, ``ainvoke`` and LangGraph's ``ToolNode``) do the
callbacks, argument parsing, error handling and the ``ToolMessage``; under replay they still
do, and only the tool's body is answered from the recording. Each tool class gets its
``_run`` / ``_arun`` wrapped the first time one of its tools runs, so classes defined after
start-up are covered too. Arguments the framework injects (state, runtime, config, callbacks)
are not recorded: they are not the model's, and differ between runs. A recorded
``ToolException`` is raised again as one, so ``handle_tool_error`` treats it as it did live.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from rewind.exporter.work import tools

from .hooking import arguments_of, replace

_BODIES = ("_run", "_arun")


def _arguments(tool: Any, config_name: str | None, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> dict[str, Any]:
    given = {k: v for k, v in kwargs.items() if k != config_name}
    drop_injected = getattr(tool, "_filter_injected_args", None)
    if callable(drop_injected):
        given = drop_injected(given)
    if len(args) == 1:
        given = {"input": args[0], **given}
    elif args:
        given = {"args": list(args), **given}
    return arguments_of(given)


def _revive(tool: Any) -> Any:
    def revive(value: Any) -> Any:  # content_and_artifact tools return a pair
        if tool.response_format == "content_and_artifact" and isinstance(value, list) \
                and len(value) == 2:
            return tuple(value)
        return value

    return revive


def patch(module: ModuleType) -> None:
    base = module.BaseTool
    tool_exception = getattr(module, "ToolException", None)

    def rebuild(kind: str, message: str) -> BaseException | None:  # handled as it was live
        return tool_exception(message) if kind == "ToolException" and tool_exception else None

    config_param = getattr(module, "_get_runnable_config_param", lambda func: None)

    def wrap_body(original: Any, asynchronous: bool) -> Any:
        config_name = config_param(original)

        def parts(tool: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            spec = tools.ToolSpec(tool.name, tool.description or None)
            return spec, _arguments(tool, config_name, args, kwargs), _revive(tool)

        if asynchronous:
            async def body_async(self: Any, *args: Any, **kwargs: Any) -> Any:
                spec, arguments, revive = parts(self, args, kwargs)
                return await tools.call_tool_async(
                    spec, arguments, lambda: original(self, *args, **kwargs), revive=revive,
                    rebuild=rebuild)

            return body_async

        def body(self: Any, *args: Any, **kwargs: Any) -> Any:
            spec, arguments, revive = parts(self, args, kwargs)
            return tools.call_tool(spec, arguments, lambda: original(self, *args, **kwargs),
                                   revive=revive, rebuild=rebuild)

        return body

    def prepare(cls: type) -> None:
        for name in _BODIES:
            owner = next((k for k in cls.__mro__ if name in vars(k)), None)
            if owner is not None:
                replace(owner, name, lambda f, a=name == "_arun": wrap_body(f, a))

    def make_run(original: Any) -> Any:
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            prepare(type(self))
            return original(self, *args, **kwargs)

        return run

    def make_arun(original: Any) -> Any:
        async def arun(self: Any, *args: Any, **kwargs: Any) -> Any:
            prepare(type(self))
            return await original(self, *args, **kwargs)

        return arun

    replace(base, "run", make_run)
    replace(base, "arun", make_arun)
