"""MkDocs hook: the cluster agent's endpoints, rendered from the OpenAPI document beside the page.

A page that holds the line ``<!-- generated: agent-api -->`` gets, in its place, one section per operation of
``docs/reference/agent-api.yaml`` (its request body, its answers by status) and one table per schema, so the
page and the document cannot disagree; ``tests/docs/test_agent_openapi.py`` holds the document's paths to the
routes the agent's server registers and its schemas to the JSON the server answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MARKER = "<!-- generated: agent-api -->"
DOCUMENT = Path(__file__).resolve().parents[1] / "reference" / "agent-api.yaml"


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _type(schema: dict[str, Any]) -> str:
    if "oneOf" in schema:
        return " or ".join(_type(option) for option in schema["oneOf"])
    if "$ref" in schema:
        name = _ref_name(schema["$ref"])
        return f"[{name}](#{name.lower()})"
    kind = schema.get("type", "object")
    kinds = kind if isinstance(kind, list) else [kind]
    shown = []
    for one in kinds:
        if one == "array":
            shown.append("array of " + _type(schema.get("items", {})))
        elif one == "object" and isinstance(schema.get("additionalProperties"), dict):
            shown.append("map of " + _type(schema["additionalProperties"]))
        else:
            shown.append(str(one))
    text = " or ".join(shown)
    if "enum" in schema:
        text += ": " + ", ".join(f"`{value}`" for value in schema["enum"])
    return text


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _answer(document: dict[str, Any], answer: dict[str, Any]) -> tuple[str, str]:
    if "$ref" in answer:
        answer = document["components"]["responses"][_ref_name(answer["$ref"])]
    content = answer.get("content", {}).get("application/json", {})
    return _cell(answer.get("description", "")), _type(content["schema"]) if "schema" in content else ""


def render(document: dict[str, Any]) -> str:
    lines: list[str] = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            lines += [f"### `{method.upper()} {path}` {{#{operation['operationId'].lower()}}}", ""]
            lines += [_cell(operation.get("summary", "")) + ".", ""]
            if "description" in operation:
                lines += [_cell(operation["description"]), ""]
            parameters = operation.get("parameters", [])
            if parameters:
                lines += ["| parameter | in | type | description |", "|---|---|---|---|"]
                for parameter in parameters:
                    if "$ref" in parameter:
                        parameter = document["components"]["parameters"][_ref_name(parameter["$ref"])]
                    lines.append(
                        f"| `{parameter['name']}` | {parameter['in']} | {_type(parameter['schema'])} |"
                        f" {_cell(parameter.get('description', ''))} |"
                    )
                lines.append("")
            body = operation.get("requestBody")
            if body is not None:
                lines += ["Body: " + _type(body["content"]["application/json"]["schema"]) + ".", ""]
            lines += ["| status | answer | body |", "|---|---|---|"]
            for status, answer in operation["responses"].items():
                description, shape = _answer(document, answer)
                lines.append(f"| {status} | {description} | {shape} |")
            lines.append("")
    lines += ["## Schemas", ""]
    for name, schema in document["components"]["schemas"].items():
        lines += [f"### {name} {{#{name.lower()}}}", ""]
        if "description" in schema:
            lines += [_cell(schema["description"]), ""]
        properties = schema.get("properties")
        if not properties:
            lines += [_type(schema) + ("" if "pattern" not in schema else f", matching `{schema['pattern']}`"), ""]
            continue
        required = set(schema.get("required", []))
        lines += ["| field | type | required | description |", "|---|---|---|---|"]
        for field, sub in properties.items():
            lines.append(
                f"| `{field}` | {_type(sub)} | {'yes' if field in required else ''} |"
                f" {_cell(sub.get('description', ''))} |"
            )
        lines.append("")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render(yaml.safe_load(DOCUMENT.read_text())))
