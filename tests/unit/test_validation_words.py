"""Validation problems read in vq's words, never the validation library's."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from vq.config.settings import check_file
from vq.domain.validation_words import CONFIG_WORDS, JSON_WORDS, describe, first_problem
from vq.errors import ConfigError

#: Phrases only the library uses; none may reach a user.
LIBRARY_WORDING = ("Input should", "Field required", "Value error", "should have", "validation")


class _Sample(BaseModel):
    model_config = ConfigDict(extra="forbid")
    count: int = Field(default=1, ge=1, le=10)
    ratio: float = 0.5
    flag: bool = False
    name: str = Field(default="x", min_length=1, max_length=4)
    tags: list[str] = Field(default_factory=list, max_length=2)
    mode: Literal["fast", "slow"] = "fast"
    table: dict[str, int] = Field(default_factory=dict)
    word: str = "ok"

    @field_validator("word")
    @classmethod
    def _no_spaces(cls, value: str) -> str:
        if " " in value:
            raise ValueError("must not contain spaces")
        return value


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"count": "abc"}, ("count", "must be a whole number")),
        ({"count": 0}, ("count", "must be at least 1")),
        ({"count": 11}, ("count", "must be at most 10")),
        ({"ratio": "half"}, ("ratio", "must be a number")),
        ({"flag": "maybe"}, ("flag", "must be true or false")),
        ({"name": ""}, ("name", "must not be empty")),
        ({"name": "toolong"}, ("name", "must be at most 4 characters")),
        ({"name": 5}, ("name", "must be text")),
        ({"tags": ["a", "b", "c"]}, ("tags", "must have at most 2 entries")),
        ({"tags": "a"}, ("tags", "must be a list")),
        ({"mode": "medium"}, ("mode", "must be one of 'fast' or 'slow'")),
        ({"table": 3}, ("table", "must be a table")),
        ({"word": "a b"}, ("word", "must not contain spaces")),
        ({"bogus": 1}, ("bogus", "unknown key")),
    ],
)
def test_each_problem_reads_in_vq_words(data: dict[str, object], expected: tuple[str, str]) -> None:
    with pytest.raises(ValidationError) as caught:
        _Sample.model_validate(data)
    found = first_problem(caught.value, "sample", CONFIG_WORDS)
    assert found == expected
    assert not any(phrase in found[1] for phrase in LIBRARY_WORDING)


def test_json_surfaces_name_fields_and_objects() -> None:
    with pytest.raises(ValidationError) as caught:
        _Sample.model_validate({"bogus": 1, "table": 3})
    messages = {describe(error, JSON_WORDS) for error in caught.value.errors()}
    assert messages == {"unknown field", "must be an object"}


def test_a_config_value_of_the_wrong_type_is_refused_in_vq_words(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[daemon]\nmax_jobs = "abc"\n')
    with pytest.raises(ConfigError) as caught:
        check_file(config)
    assert caught.value.message.endswith("config.toml:2: daemon.max_jobs: must be a whole number")
