"""What ``kubesched policy test`` loads and where its data goes: OPA's loader rules (``v1/loader``), real files in
``tmp_path``; and every bad data file is one PolicyError line naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubesched.policy.rego_test_files import load_test_sources
from kubesched.policyapi.contract import PolicyError


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_data_files_go_where_their_directories_below_the_given_path_say(tmp_path: Path) -> None:
    root = tmp_path / "policies"
    write(root / "p.rego", "package p\n")
    write(root / "data.json", '{"top": 1}')
    write(root / "kubernetes" / "authz" / "data.yaml", "level: pci\n")
    write(root / "kubernetes" / "nodes.json", '{"n": [1]}')  # any name, as OPA: not only data.json
    write(root / "kubernetes" / "authz" / "deeper" / "data.yml", "- 1\n- 2\n")  # below data, not an object
    write(root / "notes.txt", "ignored inside a directory")
    sources = load_test_sources([str(root)])
    assert sources.data == {
        "top": 1,
        "kubernetes": {"n": [1], "authz": {"level": "pci", "deeper": [1, 2]}},
    }
    assert [path for path, _ in sources.modules] == [str(root / "p.rego")]
    assert sources.warnings == ()


def test_a_file_named_on_the_command_line_goes_at_data(tmp_path: Path) -> None:
    data = write(tmp_path / "deep" / "er" / "data.json", '{"x": 1}')
    assert load_test_sources([str(data)]).data == {"x": 1}
    assert load_test_sources([], [str(data)]).data == {"x": 1}


def test_a_data_file_given_with_data_and_found_by_the_walk_is_read_once(tmp_path: Path) -> None:
    # A data file named with --data that the walk finds too (--data examples/policies/data.json beside
    # examples/policies): OPA, given the file twice, would merge it with itself and fail.
    write(tmp_path / "p_test.rego", "package p_test\n")
    data = write(tmp_path / "data.json", '{"config": {"level": "pci"}}')
    sources = load_test_sources([str(tmp_path)], [str(data), str(data)])
    assert sources.data == {"config": {"level": "pci"}}
    assert sources.warnings == ()
    assert load_test_sources([str(tmp_path), str(tmp_path)]).data == {"config": {"level": "pci"}}


def test_data_naming_a_nested_file_places_it_at_data_and_says_so(tmp_path: Path) -> None:
    nested = write(tmp_path / "kubernetes" / "data.json", '{"x": 1}')
    sources = load_test_sources([str(tmp_path)], [str(nested)])
    assert sources.data == {"x": 1}
    [warning] = sources.warnings
    assert str(nested) in warning and "data.kubernetes" in warning


def test_yaml_timestamps_stay_strings_as_opa_reads_yaml(tmp_path: Path) -> None:
    write(tmp_path / "data.yaml", "scanned: 2026-11-28T09:00:00Z\nday: 2026-11-28\n")
    assert load_test_sources([str(tmp_path)]).data == {"scanned": "2026-11-28T09:00:00Z", "day": "2026-11-28"}


def test_a_symlink_loop_is_walked_once(tmp_path: Path) -> None:
    write(tmp_path / "p.rego", "package p\n")
    (tmp_path / "loop").symlink_to(tmp_path, target_is_directory=True)
    assert [path for path, _ in load_test_sources([str(tmp_path)]).modules] == [str(tmp_path / "p.rego")]


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        pytest.param("data.json", "{bad", "not valid JSON", id="json-that-does-not-parse"),
        pytest.param("data.yaml", "a: [1\n", "not valid YAML: line 2", id="yaml-that-does-not-parse"),
        pytest.param("data.json", "[1, 2]", "must hold an object at the top level, not an array", id="top-not-object"),
        pytest.param("data.yaml", "just a string\n", "not a string", id="top-a-string"),
        pytest.param("data.yaml", ALIAS_BOMB, "alias bomb", id="yaml-alias-bomb"),
        pytest.param("data.yaml", "x: .nan\n", "JSON cannot represent", id="nan"),
        pytest.param("data.json", "[" * 100_000, "", id="nested-too-deeply"),
        pytest.param("data.txt", "{}", "can't recognize file type", id="named-file-of-unknown-kind"),
        pytest.param("p.rego", "package p\n", "not policies", id="policy-given-as-data"),
    ],
)
def test_a_bad_data_file_is_one_line_naming_it(tmp_path: Path, name: str, text: str, expected: str) -> None:
    path = write(tmp_path / name, text)
    with pytest.raises(PolicyError) as caught:
        load_test_sources([], [str(path)])
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and expected in message
    assert "\n" not in message


def test_two_files_giving_one_key_two_values_is_an_error_naming_the_second(tmp_path: Path) -> None:
    write(tmp_path / "a" / "data.json", '{"x": 1}')
    second = write(tmp_path / "data.json", '{"a": {"x": 2}}')
    with pytest.raises(PolicyError, match=r"data\.a\.x is also defined") as caught:
        load_test_sources([str(tmp_path)])
    assert str(caught.value).startswith(str(second))


def test_a_missing_path_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"nope: no such file or directory$"):
        load_test_sources([str(tmp_path / "nope")])
