"""campaign.py: whole-file validation, warnings vs --strict, ids, deep merge, init scaffold."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from perfreport.config.campaign import Campaign, campaign_init, load_campaign
from perfreport.config.context import deep_merge, missing_context_fields
from perfreport.errors import ConfigError, IdError, InputError, PerfReportError

VALID = """\
schema_version: 1
campaign: h200-decoder-layer
hardware: h200_sm90
sol_rigor: L2
ceilings_override: null
context:
  identity: {model: Llama-3.1-8B-Instruct, hf_path: meta-llama/Llama-3.1-8B-Instruct, quant: bf16}
  parallelism: {tp: 1, dp: 1, pp: 1, ep: 1, strategy: tp-only}
  serving: {max_num_seqs: 256, gpu_memory_utilization: 0.9, enforce_eager: false}
  workload: {dataset: random, isl: 1024, osl: 128, concurrency: 16}
  regime: {cache: warm, tier: latency}
  grounding: {trials: 3, same_node: true}
cells:
  - id: prefill-t8192
    description: Prefill of 8192 tokens.
    captures: [captures/prefill.ncu-rep.gz, shared/../captures/prefill.csv]
    context:
      workload: {isl: 8192, osl: 1}
      parallelism: {tp: 2}
  - id: decode-b16
    context:
      regime: {cache: cold}
krhpa: {owner: perf-team}
"""


def write_config_text(tmp_path: Path, text: str, name: str = "h200-decoder-layer") -> Path:
    """Write config.yaml verbatim: these tests feed the loader deliberate defects (tests/conftest.py's
    write_config builds only valid minimal configs)."""
    campaign_dir = tmp_path / name
    campaign_dir.mkdir(parents=True, exist_ok=True)
    (campaign_dir / "config.yaml").write_text(textwrap.dedent(text), encoding="utf-8")
    return campaign_dir


def problems_of(tmp_path: Path, text: str, strict: bool = False) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_campaign(write_config_text(tmp_path, text), strict=strict)
    return info.value.problems


def test_valid_config_loads_every_field_and_resolves_capture_paths(tmp_path: Path) -> None:
    campaign_dir = write_config_text(tmp_path, VALID)
    c = load_campaign(campaign_dir)
    assert isinstance(c, Campaign)
    assert (c.id, c.hardware, c.sol_rigor) == ("h200-decoder-layer", "h200_sm90", "L2")
    assert c.dir == campaign_dir.resolve()
    assert c.ceilings_override is None
    assert c.warnings == []
    assert c.krhpa == {"owner": "perf-team"}
    assert [cell.id for cell in c.cells] == ["prefill-t8192", "decode-b16"]
    prefill = c.cell("prefill-t8192")
    assert prefill.description == "Prefill of 8192 tokens."
    assert prefill.capture_paths(c) == [
        (campaign_dir / "captures/prefill.ncu-rep.gz").resolve(),
        (campaign_dir / "captures/prefill.csv").resolve(),
    ]
    assert prefill.cell_dir(c) == campaign_dir.resolve() / "cells" / "prefill-t8192"
    assert c.context["serving"]["gpu_memory_utilization"] == pytest.approx(0.9)


def test_several_errors_reported_together_with_paths(tmp_path: Path) -> None:
    text = """\
    schema_version: 2
    campaign: ../x
    hardware: 7
    sol_rigor: L5
    context:
      parallelism: {tp: eight, dp: 0, pp: 1.5, ep: true}
      serving: {gpu_memory_utilization: 1.5, enforce_eager: "no"}
      regime: {cache: lukewarm}
      workload: [1, 2]
    cells:
      - id: ok-1
      - id: a/b
        captures: /abs/path.ncu-rep
      - just-a-string
      - id: ok-2
        description: ""
        captures: [/abs/k.csv, 3]
        context:
          parallelism: {tp: eight}
          grounding: {trials: 0, sol_rigor: L9}
    krhpa: [not, a, mapping]
    """
    problems = problems_of(tmp_path, text)
    paths = [p.split(": ", 1)[0] for p in problems]
    assert paths == [
        "schema_version",
        "campaign",
        "hardware",
        "sol_rigor",
        "krhpa",
        "context.parallelism.tp",
        "context.parallelism.dp",
        "context.parallelism.pp",
        "context.parallelism.ep",
        "context.serving.gpu_memory_utilization",
        "context.serving.enforce_eager",
        "context.regime.cache",
        "context.workload",
        "cells[1].id",
        "cells[1].captures",
        "cells[2]",
        "cells[3].description",
        "cells[3].captures[0]",
        "cells[3].captures[1]",
        "cells[3].context.parallelism.tp",
        "cells[3].context.grounding.trials",
        "cells[3].context.grounding.sol_rigor",
    ]
    assert "cells[3].context.parallelism.tp: expected int from 1 to 2147483647, got 'eight'" in problems
    assert "context.parallelism.dp: expected int from 1 to 2147483647, got 0" in problems
    assert "context.parallelism.ep: expected int from 1 to 2147483647, got True" in problems
    assert "context.serving.gpu_memory_utilization: expected float in (0, 1], got 1.5" in problems
    assert "context.regime.cache: expected one of warm, cold, got 'lukewarm'" in problems
    assert "sol_rigor: expected one of L1, L2, L3, L4, got 'L5'" in problems
    assert any(p.startswith("hardware: ") and "quote it" in p for p in problems)
    # One error, one message listing them all.
    with pytest.raises(ConfigError) as info:
        load_campaign(tmp_path / "h200-decoder-layer")
    assert f"{len(problems)} problem(s)" in info.value.format_message()
    assert "config.yaml" in info.value.source


def test_missing_required_keys_are_each_named(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, "cells: []\n")
    assert [p.split(": ", 1)[0] for p in problems] == ["schema_version", "campaign", "hardware", "sol_rigor"]
    assert all("required key is missing" in p for p in problems)


def test_unknown_keys_warn(tmp_path: Path) -> None:
    text = VALID.replace("sol_rigor: L2\nceilings", "sol_rigor: L2\nowner: me\nceilings").replace(
        "  regime: {cache: warm, tier: latency}",
        "  regime: {cache: warm, tier: latency, temp: hot}\n  hardware_extra: {a: 1}",
    ).replace("  - id: decode-b16\n", "  - id: decode-b16\n    note: x\n")
    c = load_campaign(write_config_text(tmp_path, text))
    assert [w.split(": ", 1)[0] for w in c.warnings] == [
        "owner", "context.regime.temp", "context.hardware_extra", "cells[1].note",
    ]
    assert all("unknown key, ignored" in w for w in c.warnings)
    assert "temp" not in c.context["regime"]
    assert "hardware_extra" not in c.context


def test_unknown_key_suggests_close_match(tmp_path: Path) -> None:
    text = VALID.replace("max_num_seqs: 256", "max_num_seq: 256")
    c = load_campaign(write_config_text(tmp_path, text))
    assert c.warnings == ["context.serving.max_num_seq: unknown key, ignored; did you mean 'max_num_seqs'?"]


def test_unknown_keys_error_when_strict(tmp_path: Path) -> None:
    text = VALID.replace("  - id: decode-b16\n", "  - id: decode-b16\n    note: x\n").replace(
        "parallelism: {tp: 2}", "parallelism: {tp: 0}"
    )
    problems = problems_of(tmp_path, text, strict=True)
    assert [p.split(": ", 1)[0] for p in problems] == ["cells[0].context.parallelism.tp", "cells[1].note"]
    assert "--strict" in problems[1]


@pytest.mark.parametrize("bad", ["../x", ".hidden", "a/b", "", "-dash", "x y"])
def test_bad_cell_ids_rejected(tmp_path: Path, bad: str) -> None:
    text = VALID.replace("id: decode-b16", f"id: {bad!r}")
    problems = problems_of(tmp_path, text)
    assert problems == [
        f"cells[1].id: expected an id matching [A-Za-z0-9][A-Za-z0-9._-]* (letters, digits, '.', '_', "
        f"'-'; no '/'), got {bad!r}"
    ]


@pytest.mark.parametrize("bad", ["../x", ".hidden", "a/b"])
def test_bad_campaign_id_rejected(tmp_path: Path, bad: str) -> None:
    problems = problems_of(tmp_path, VALID.replace("campaign: h200-decoder-layer", f"campaign: {bad!r}"))
    assert [p.split(": ", 1)[0] for p in problems] == ["campaign"]


def test_numeric_id_hints_quoting(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, VALID.replace("id: decode-b16", "id: 2024"))
    assert problems[0].startswith("cells[1].id: expected an id")
    assert 'quote it: "2024"' in problems[0]


def test_duplicate_cell_ids_rejected(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, VALID.replace("id: decode-b16", "id: prefill-t8192"))
    assert len(problems) == 1
    assert problems[0].startswith("cells[1].id: duplicate cell id 'prefill-t8192' (also cells[0].id)")


def test_cell_context_deep_merges_over_the_campaign_defaults(tmp_path: Path) -> None:
    c = load_campaign(write_config_text(tmp_path, VALID))
    eff = c.cell("prefill-t8192").effective_context(c)
    assert eff["workload"] == {"dataset": "random", "isl": 8192, "osl": 1, "concurrency": 16}
    assert eff["parallelism"] == {"tp": 2, "dp": 1, "pp": 1, "ep": 1, "strategy": "tp-only"}
    assert eff["regime"] == {"cache": "warm", "tier": "latency"}
    assert c.cell("decode-b16").effective_context(c)["regime"] == {"cache": "cold", "tier": "latency"}
    # The campaign defaults are not mutated by a merge.
    assert c.context["workload"]["isl"] == 1024


def test_deep_merge_null_does_not_override_and_leaves_the_base_intact() -> None:
    base = {"a": {"x": 1, "y": {"z": 2}}, "b": 3}
    merged = deep_merge(base, {"a": {"x": None, "y": {"w": 4}}, "b": None, "c": 5})
    assert merged == {"a": {"x": 1, "y": {"z": 2, "w": 4}}, "b": 3, "c": 5}
    assert base == {"a": {"x": 1, "y": {"z": 2}}, "b": 3}


def test_missing_context_fields_lists_null_fields_identity_first() -> None:
    missing = missing_context_fields({"parallelism": {"tp": 1, "dp": None}})
    assert "parallelism.dp" in missing and "parallelism.tp" not in missing
    assert missing[0] == "identity.model"


def test_unknown_cell_lookup_lists_the_cell_ids_and_path_ids_are_refused(tmp_path: Path) -> None:
    c = load_campaign(write_config_text(tmp_path, VALID))
    with pytest.raises(InputError) as info:
        c.cell("nope")
    msg = info.value.format_message()
    assert "'nope'" in msg and "prefill-t8192, decode-b16" in msg
    with pytest.raises(IdError):
        c.cell("../x")


def test_ceilings_override_resolved_and_checked(tmp_path: Path) -> None:
    text = VALID.replace("ceilings_override: null", "ceilings_override: ceil/extra.yaml")
    with pytest.raises(ConfigError) as info:
        load_campaign(write_config_text(tmp_path, text))
    assert info.value.problems[0].startswith("ceilings_override: file ")
    camp = tmp_path / "h200-decoder-layer"
    (camp / "ceil").mkdir()
    (camp / "ceil" / "extra.yaml").write_text("{}\n")
    c = load_campaign(camp)
    assert c.ceilings_override == (camp / "ceil" / "extra.yaml").resolve()
    assert c.ceilings_override.is_absolute()


def test_ceilings_override_outside_the_campaign_is_refused_and_not_echoed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.yaml"
    secret.write_text("token: " + "s3cr3t" * 40 + "\n")
    camp = write_config_text(tmp_path, VALID.replace("ceilings_override: null", "ceilings_override: ../secret.yaml"))
    (camp / "link.yaml").symlink_to(secret)
    for value in ("../secret.yaml", "link.yaml"):
        config = camp / "config.yaml"
        config.write_text(VALID.replace("ceilings_override: null", f"ceilings_override: {value}"))
        with pytest.raises(ConfigError) as info:
            load_campaign(camp)
        problem = info.value.problems[0]
        assert problem.startswith(f"ceilings_override: {value!r} leads outside the campaign folder"), problem
        assert "s3cr3t" not in info.value.format_message()
    # inside the campaign, a file that is not ceilings YAML is named, its content cut to a few words
    (camp / "bad.yaml").write_text("- " + "s3cr3t" * 40 + "\n")
    from perfreport.config.ceilings import load_ceilings
    with pytest.raises(ConfigError) as bad:
        load_ceilings(camp / "bad.yaml")
    msg = bad.value.format_message()
    assert str(camp / "bad.yaml") in msg and msg.count("s3cr3t") <= 10, msg


def test_missing_campaign_folder_or_config_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load_campaign(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="has no config.yaml"):
        load_campaign(tmp_path / "empty")


def test_yaml_syntax_error_names_its_line_and_column(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, "schema_version: 1\ncampaign: x\n  hardware: [unclosed\n")
    assert len(problems) == 1
    assert problems[0].startswith("line 3, column ")
    assert "YAML syntax error" in problems[0]


@pytest.mark.parametrize(("text", "got"), [("", "an empty file"), ("- a\n- b\n", "a list"), ("x\n", "'x'")])
def test_top_level_must_be_mapping(tmp_path: Path, text: str, got: str) -> None:
    problems = problems_of(tmp_path, text)
    assert problems[0].startswith("(top level): expected a mapping")
    assert f"got {got}" in problems[0]


def test_campaign_init_round_trips(tmp_path: Path) -> None:
    path = campaign_init(tmp_path / "my-run")
    assert path == tmp_path / "my-run" / "config.yaml"
    text = path.read_text()
    assert text.startswith("# ")
    c = load_campaign(tmp_path / "my-run", strict=True)
    assert (c.id, c.hardware, c.sol_rigor, c.warnings) == ("my-run", "h200_sm90", "L2", [])
    assert [cell.id for cell in c.cells] == ["example-cell"]
    # Every context field is present (blank) so users see what to fill in.
    assert set(yaml.safe_load(text)["context"]) == {
        "identity", "parallelism", "serving", "workload", "regime", "stack", "grounding",
    }


def test_campaign_init_quotes_values_yaml_would_reinterpret(tmp_path: Path) -> None:
    campaign_init(tmp_path / "x", campaign_id="2024", hardware="h100_sm90")
    c = load_campaign(tmp_path / "x")
    assert (c.id, c.hardware) == ("2024", "h100_sm90")
    # a hardware value YAML would read as a boolean is no ceiling token: refused before anything is written
    with pytest.raises(PerfReportError, match="hardware: 'yes' is not a ceiling token; known: a100_pcie_40gb_sm80"):
        campaign_init(tmp_path / "y", hardware="yes")
    assert not (tmp_path / "y").exists()


def test_campaign_init_refuses_overwrite(tmp_path: Path) -> None:
    path = campaign_init(tmp_path / "run", campaign_id="run-1", hardware="h100_sm90")
    before = path.read_bytes()
    with pytest.raises(PerfReportError, match="already exists; refusing to overwrite"):
        campaign_init(tmp_path / "run")
    assert path.read_bytes() == before


@pytest.mark.parametrize("bad", ["../x", ".hidden", "a/b"])
def test_campaign_init_refuses_a_bad_id_and_writes_nothing(tmp_path: Path, bad: str) -> None:
    with pytest.raises(IdError):
        campaign_init(tmp_path / "run", campaign_id=bad)
    assert not (tmp_path / "run").exists()


def test_campaign_init_bad_folder_name_suggests_id(tmp_path: Path) -> None:
    with pytest.raises(IdError, match="defaults to the folder name 'My Run'"):
        campaign_init(tmp_path / "My Run")
    campaign_init(tmp_path / "My Run", campaign_id="my-run")
    assert load_campaign(tmp_path / "My Run").id == "my-run"


def test_sol_rigor_is_one_field(tmp_path: Path) -> None:
    """The top-level sol_rigor is the only one: every context's grounding.sol_rigor carries it; written again in a
    context it is refused where it differs and a warning where it repeats it."""
    c = load_campaign(write_config_text(tmp_path / "one", VALID))
    assert c.context["grounding"]["sol_rigor"] == "L2"
    assert all(cell.effective_context(c)["grounding"]["sol_rigor"] == "L2" for cell in c.cells)
    same = VALID.replace("  grounding: {trials: 3,", "  grounding: {sol_rigor: L2, trials: 3,")
    c = load_campaign(write_config_text(tmp_path / "same", same))
    assert c.warnings == ["context.grounding.sol_rigor repeats the top-level sol_rigor: L2; it is one field, set "
                          "at the top: drop this line"]
    differs = VALID.replace("  grounding: {trials: 3,", "  grounding: {sol_rigor: L3, trials: 3,")
    with pytest.raises(ConfigError) as err:
        load_campaign(write_config_text(tmp_path / "differs", differs))
    assert "context.grounding.sol_rigor: 'L3' differs from the top-level sol_rigor: 'L2'; sol_rigor is one " \
           "field: set it once at the top of config.yaml and drop this one" in err.value.format_message()


def test_the_scaffold_shows_n_a_and_has_one_sol_rigor(tmp_path: Path) -> None:
    path = campaign_init(tmp_path / "fresh")
    text = path.read_text()
    assert 'max_num_seqs: "n/a: PyTorch eager layer, no serving engine"' in text
    assert text.count("sol_rigor:") == 1
    assert load_campaign(path.parent).warnings == []
