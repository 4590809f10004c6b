#!/usr/bin/env python3
"""Reference renderings for tests/test_chat.c.

Renders every conversation of a conversations file (tests/data/chat/
conversations.json) with the real Qwen chat templates, using jinja2 set up
the way Hugging Face transformers' apply_chat_template sets it up
(transformers/utils/chat_template_utils.py, _compile_jinja_template):

  - jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True,
    lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]);
    keep_trailing_newline stays at jinja2's default (False).
    (transformers also adds an AssistantTracker extension for
    {% generation %} blocks, which these templates do not use.)
  - the `tojson` filter replaced by
    json.dumps(x, ensure_ascii=False, indent=None, separators=None,
    sort_keys=False): keys in insertion order, ", " and ": " separators,
    no HTML escaping (jinja2's own tojson would sort keys and escape <>&').
  - globals raise_exception(msg) -> jinja2.exceptions.TemplateError(msg)
    and strftime_now(fmt).
  - render(messages=..., tools=... or None, documents=None,
    add_generation_prompt=..., **kwargs) where kwargs holds enable_thinking
    only when the conversation sets it (so "undefined" is tested too).

Tool-call arguments given as a string (the OpenAI wire form) are parsed
with json.loads when they hold valid JSON and passed as a string otherwise,
as llama.cpp does for templates that accept object arguments
(common/chat.cpp, workaround::func_args_not_string); brigade's C API takes
arguments as JSON text and applies the same rule.

Usage: chat_reference.py TEMPLATE_DIR CONVERSATIONS_JSON
Prints {"results": [{"name", "family", "output"} | {"name", "family",
"error", "error_type"}]} as ASCII JSON on stdout. Exits non-zero if jinja2
is missing or a template file cannot be read: the test must fail then.
"""
import copy
import json
import os
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

TEMPLATE_FILES = {
    "qwen3": "Qwen-Qwen3-0.6B.jinja",
    "qwen3.5": "Qwen3.5-4B.jinja",
}


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def prepare_messages(messages):
    messages = copy.deepcopy(messages)
    for m in messages:
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function", tc)
            args = fn.get("arguments")
            if isinstance(args, str):
                try:
                    fn["arguments"] = json.loads(args)
                except ValueError:
                    pass
    return messages


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: chat_reference.py TEMPLATE_DIR CONVERSATIONS_JSON")
    if tuple(int(x) for x in jinja2.__version__.split(".")[:2]) < (3, 1):
        sys.exit("chat_reference.py: jinja2 >= 3.1 is needed (the templates use |items), "
                 "found " + jinja2.__version__)
    tdir, conv_path = sys.argv[1], sys.argv[2]
    env = make_env()
    templates = {}
    for family, fname in TEMPLATE_FILES.items():
        with open(os.path.join(tdir, fname), encoding="utf-8") as f:
            templates[family] = env.from_string(f.read())
    with open(conv_path, encoding="utf-8") as f:
        data = json.load(f)
    toolsets = data.get("toolsets", {})

    results = []
    for conv in data["conversations"]:
        tools = conv.get("tools")
        if isinstance(tools, str):
            tools = toolsets[tools]
        kwargs = {}
        if "enable_thinking" in conv:
            kwargs["enable_thinking"] = conv["enable_thinking"]
        for family in conv.get("families", list(TEMPLATE_FILES)):
            r = {"name": conv["name"], "family": family}
            try:
                r["output"] = templates[family].render(
                    messages=prepare_messages(conv["messages"]),
                    tools=copy.deepcopy(tools),
                    documents=None,
                    add_generation_prompt=conv.get("add_generation_prompt", False),
                    **kwargs)
            except Exception as e:  # the template refused: the C side must fail too
                r["error"] = str(e)
                r["error_type"] = type(e).__name__
            results.append(r)
    json.dump({"jinja2": jinja2.__version__, "results": results}, sys.stdout, ensure_ascii=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
