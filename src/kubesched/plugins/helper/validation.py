"""apimachinery's name and label validators, with their exact messages.

Who calls it: plugin args validation (ignoredResources are label names, NodeAffinity's addedAffinity has
label keys and values) and :mod:`.resources` (an extended resource name is one that, prefixed with
``requests.``, is a qualified name). Messages are apimachinery's ``IsQualifiedName``, ``IsDNS1123Subdomain``
and ``IsValidLabelValue`` word for word, so errors read like kube-scheduler's.
"""

from __future__ import annotations

import re

_QNAME_CHAR = "[A-Za-z0-9]"
_QNAME_EXT_CHAR = "[-A-Za-z0-9_.]"
QUALIFIED_NAME_FMT = f"({_QNAME_CHAR}{_QNAME_EXT_CHAR}*)?{_QNAME_CHAR}"
_QUALIFIED_NAME_ERR = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_QUALIFIED_NAME_MAX = 63
_QUALIFIED_NAME_RE = re.compile(QUALIFIED_NAME_FMT)

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = f"{_DNS1123_LABEL_FMT}(\\.{_DNS1123_LABEL_FMT})*"
_DNS1123_SUBDOMAIN_ERR = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_MAX = 253
_DNS1123_SUBDOMAIN_RE = re.compile(DNS1123_SUBDOMAIN_FMT)

LABEL_VALUE_FMT = f"({QUALIFIED_NAME_FMT})?"
_LABEL_VALUE_ERR = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_VALUE_MAX = 63
_LABEL_VALUE_RE = re.compile(LABEL_VALUE_FMT)


def empty_error() -> str:
    return "must be non-empty"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def regex_error(message: str, fmt: str, *examples: str) -> str:
    """apimachinery's RegexError, including its double space before each "or"."""
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    shown = "".join(("" if i == 0 else " or ") + f"'{example}', " for i, example in enumerate(examples))
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def dns1123_subdomain_errors(value: str) -> list[str]:
    errors: list[str] = []
    if len(value) > _DNS1123_SUBDOMAIN_MAX:
        errors.append(max_len_error(_DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errors.append(regex_error(_DNS1123_SUBDOMAIN_ERR, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errors


def qualified_name_errors(value: str) -> list[str]:
    """``IsQualifiedName``: an optional DNS-subdomain prefix and "/", then a name of at most 63 characters."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part " + empty_error())
        else:
            errors.extend("prefix part " + message for message in dns1123_subdomain_errors(prefix))
    else:
        return [
            "a qualified name "
            + regex_error(_QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errors.append("name part " + empty_error())
    elif len(name) > _QUALIFIED_NAME_MAX:
        errors.append("name part " + max_len_error(_QUALIFIED_NAME_MAX))
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errors.append(
            "name part " + regex_error(_QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errors


def label_value_errors(value: str) -> list[str]:
    """``IsValidLabelValue``."""
    errors: list[str] = []
    if len(value) > _LABEL_VALUE_MAX:
        errors.append(max_len_error(_LABEL_VALUE_MAX))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errors.append(regex_error(_LABEL_VALUE_ERR, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errors
