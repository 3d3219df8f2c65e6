from __future__ import annotations

import dataclasses

import msgspec
from msgspec.structs import replace

from harness.core import jsonio
from harness.core.results import CellResult, Outcome
from harness.report.site.model import Workaround, build_site, spec_versions

CASES = {
    "mk::repro": {"case": "mk", "variant": "repro", "failure": "addmm on Half",
                  "upstream": ["https://github.com/arcee-ai/mergekit/issues/175"],
                  "signatures": [{"name": "addmm-half"}]},
    "mk::workaround[bfloat16]": {"case": "mk", "variant": "workaround[bfloat16]",
                                 "failure": "addmm on Half", "signatures": []},
}


def cell(env: str, variant: str, outcome: Outcome, hardware: str = "cpu", reason: str = "",
         built: bool = True) -> CellResult:
    torch = env.split("-")[-1]
    return CellResult(run_id="r", cell_id=f"{env}/{variant}/{hardware}", environment=env,
                      values={"torch": torch}, env_key="k", backend="uv", case_id="mk",
                      variant=variant, nodeid="n", hardware_target=hardware, outcome=outcome,
                      reason=reason,
                      fingerprint={"key": {"torch": torch, "pytest": "9"}} if built else {})


def envs(*names: str) -> dict[str, dict[str, object]]:
    return {n: {"requirements": [f"torch=={n.split('-')[-1]}"], "backend": "uv"}
            for n in names}


def test_the_verdict_is_derived_from_the_results_and_rows_sort_as_versions() -> None:
    results = []
    for torch, repro in (("2.10.0", Outcome.PASS), ("2.0.1", Outcome.REPRODUCED),
                         ("2.1.2", Outcome.REPRODUCED), ("2.2.2", Outcome.PASS)):
        results += [cell(f"t-{torch}", "repro", repro),
                    cell(f"t-{torch}", "workaround[bfloat16]", Outcome.PASS),
                    cell(f"t-{torch}", "repro", Outcome.NOT_RUN, "sm_90", "no sm_90 here")]
    site = build_site(results, envs("t-2.10.0", "t-2.0.1", "t-2.1.2", "t-2.2.2"), CASES,
                      [{"run_id": "r", "created": 0}], {})
    (table,) = site.failures
    assert table.verdict == ("affected: torch 2.0.1, 2.1.2", "not affected: torch ≥ 2.2.2",
                             "workaround[bfloat16] works on every tested version",
                             "sm_90: not tested this run")
    assert [r.label for r in table.rows] == [  # versions, not strings: 2.10 after 2.2
        "torch 2.0.1", "torch 2.1.2", "torch 2.2.2", "torch 2.10.0"]
    assert table.hardware == ("cpu",) and table.not_tested == ("sm_90",)
    assert [b.label for b in table.rows[0].cells["cpu"]] == ["REPRO", "PASS"]  # repro first
    assert table.upstream == ("https://github.com/arcee-ai/mergekit/issues/175",)


def test_the_verdict_says_its_parts_and_nothing_else() -> None:
    """The check compares the verdict's parts with the record; its text is made of them
    alone: ranges over the tested versions, "≥" for a clean top, each workaround's sentence,
    what was not tested or built, what bisects found."""
    torches = ("2.0.1", "2.1.2", "2.2.2", "2.3.0")
    (table,) = build_site([cell(f"t-{v}", "repro", Outcome.PASS) for v in torches],
                          envs(*(f"t-{v}" for v in torches)), CASES, [{}], {}).failures
    assert table.verdict == ("not affected: torch 2.0.1–2.3.0",)

    def said(**parts: object) -> tuple[str, ...]:
        return dataclasses.replace(table, **parts).verdict

    assert said(affected=frozenset(torches[:2]), clean=frozenset(torches[2:])) == (
        "affected: torch 2.0.1, 2.1.2", "not affected: torch ≥ 2.2.2")
    assert said(affected=frozenset(torches[:3]), clean=frozenset({"2.3.0"}))[0] == (
        "affected: torch 2.0.1–2.2.2")
    assert said(affected=frozenset({"2.2.2"}), clean=frozenset({"2.0.1", "2.3.0"}))[1] == (
        "not affected: torch 2.0.1, 2.3.0")
    assert said(clean=frozenset()) == (
        "the reproduction did not run to a verdict here (see the table)",)
    assert said(clean=frozenset(), rows=()) == ("not run here",)
    w = Workaround(variant="w", works=frozenset({"2.3.0"}), fails=frozenset(torches[:3]),
                   caveat="fp8 off")
    assert said(clean=frozenset(), reproduces=False, workarounds=(
        w, dataclasses.replace(w, fails=frozenset()), dataclasses.replace(w, works=frozenset()),
        Workaround(variant="x", works=frozenset(), fails=frozenset(), why="needs sm_90"),
        Workaround(variant="y", works=frozenset(), fails=frozenset()))) == (
        "w works on torch 2.3.0; fails on 2.0.1–2.2.2; caveat: fp8 off",
        "w works on every tested version; caveat: fp8 off", "w fails on every tested version",
        "x: not run (needs sm_90)", "y: not run")
    assert said(not_tested=("sm_90", "sm_100"), unbuildable=(("t-9", "no torch"),),
                bisected=("bisect: first fixed in torch 2.2.2",))[1:] == (
        "sm_90/sm_100: not tested this run", "could not build: t-9",
        "bisect: first fixed in torch 2.2.2")


def test_an_environment_that_never_built_is_listed_once_not_drawn() -> None:
    results = [cell("t-2.0.1", "repro", Outcome.REPRODUCED),
               cell("t-2.2.2", "repro", Outcome.ERROR, reason="uv: no torch==9\nmore",
                    built=False),
               cell("t-2.2.2", "workaround[bfloat16]", Outcome.ERROR, reason="uv: no torch==9",
                    built=False),
               cell("t-2.3.0", "repro", Outcome.NOT_RUN, reason="needs sm_90")]
    site = build_site(results, envs("t-2.0.1", "t-2.2.2", "t-2.3.0"), CASES, [{}], {})
    (table,) = site.failures
    assert site.unbuildable == (("t-2.2.2", "uv: no torch==9"),)
    assert [r.environment for r in table.rows] == ["t-2.0.1"]
    assert table.not_run_rows == 1 and table.unbuildable == (("t-2.2.2", "uv: no torch==9"),)
    assert table.verdict[-1] == "could not build: t-2.2.2"
    assert site.header.ran == 3 and site.header.tested == ("cpu",)


def test_a_workaround_that_helps_only_somewhere_says_where() -> None:
    results = [cell("t-2.0.1", "repro", Outcome.REPRODUCED),
               cell("t-2.0.1", "workaround[bfloat16]", Outcome.FAIL),
               cell("t-2.1.2", "repro", Outcome.REPRODUCED),
               cell("t-2.1.2", "workaround[bfloat16]", Outcome.PASS)]
    (table,) = build_site(results, envs("t-2.0.1", "t-2.1.2"), CASES, [{}], {}).failures
    assert "workaround[bfloat16] works on torch 2.1.2; fails on 2.0.1" in table.verdict


def test_hundreds_of_versions_read_as_ranges_of_the_tested_ones_then_a_count() -> None:
    versions = [f"2.{minor}.{patch}" for minor in range(30) for patch in range(10)]  # 300
    gap = {"2.3.4", "2.3.5"}  # in the middle of the affected run: these did not reproduce
    results = []
    for v in versions:
        affected = version_key(v) < (2, 5) and v not in gap
        results.append(cell(f"t-{v}", "repro", Outcome.REPRODUCED if affected else Outcome.PASS))
        helps = version_key(v) >= (2, 20) or v.endswith(".0")  # fails on 2.x.1–2.x.9
        results.append(cell(f"t-{v}", "workaround[bfloat16]",
                            Outcome.PASS if helps else Outcome.FAIL))
    (table,) = build_site(results, envs(*(f"t-{v}" for v in versions)), CASES, [{}],
                          {}).failures
    assert table.verdict[0] == "affected: torch 2.0.0–2.3.3, 2.3.6–2.4.9"
    assert table.verdict[1] == "not affected: torch 2.3.4, 2.3.5, 2.5.0–2.29.9"
    helps, fails = table.verdict[2].split("; fails on ")
    assert helps == ("workaround[bfloat16] works on torch 2.0.0, 2.1.0, 2.2.0, 2.3.0, 2.4.0, "
                     "2.5.0, 2.6.0, 2.7.0, 2.8.0, 2.9.0, 2.10.0, 2.11.0 and 108 more (the table "
                     "lists them)")  # 2.12.0 … 2.19.0, and 2.20.0–2.29.9: 8 + 100
    assert fails == ", ".join(f"2.{m}.1–2.{m}.9" for m in range(12)) + (
        " and 72 more (the table lists them)")  # 2.12.x … 2.19.x: 8 × 9


def version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def test_spec_versions_read_pins_specifiers_and_urls() -> None:
    got = spec_versions({"requirements": ["torch==2.6.0", "numpy<2", "transformer-engine"
                                          "[pytorch]==2.2.0", "flashinfer-python @ git+https://"
                                          "github.com/kvcache-ai/custom_flashinfer@fd94393"],
                         "cuda": "12.4", "python": "3.11", "backend": "uv"})
    assert got == {"torch": "2.6.0", "numpy": "<2", "transformer-engine": "2.2.0",
                   "flashinfer-python": "@fd94393", "cuda": "12.4", "python": "3.11",
                   "backend": "uv"}


def test_probes_make_a_capability_grid() -> None:
    probe = [CellResult.from_dict({**cell(f"t-{v}", "sdpa[cpu]", o).to_dict(),
                                   "case_id": "probes"})
             for v, o in (("2.0.1", Outcome.FAIL), ("2.2.2", Outcome.PASS),
                          ("2.5.1", Outcome.PASS))]
    site = build_site(probe, envs("t-2.0.1", "t-2.2.2", "t-2.5.1"), {}, [{}], {})
    assert site.failures == () and site.grid is not None
    ((name, package, cells),) = site.grid.rows
    assert (name, package) == ("sdpa[cpu]", "torch") and cells["cpu"].works == ("2.2.2", "2.5.1")
    assert cells["cpu"].failed == ("2.0.1",) and cells["cpu"].css == "o-mixed"


def test_a_probe_that_needs_a_package_lists_its_versions() -> None:
    rows = []
    for te, outcome in (("1.13.0", Outcome.PASS), ("2.2.0", Outcome.FAIL)):
        r = cell(f"t-{te}", "fp8_te", outcome, "sm_90")
        rows.append(CellResult.from_dict({**r.to_dict(), "case_id": "probes", "fingerprint": {
            "key": {"torch": "2.5.1", "transformer-engine": te}}}))
    cases = {"probes::fp8_te": {"case": "probes", "variant": "fp8_te", "requires": [
        {"cuda": True, "packages": {"transformer-engine": ""}}]}}
    site = build_site(rows, envs("t-1.13.0", "t-2.2.0"), cases, [{}], {})
    assert site.grid is not None
    ((_, package, cells),) = site.grid.rows
    assert package == "transformer-engine"
    assert (cells["sm_90"].works, cells["sm_90"].failed) == (("1.13.0",), ("2.2.0",))


def test_a_probe_that_reproduced_is_missing_not_working() -> None:
    """probes.html said matmul[float16-cpu] works on torch 2.0.1, where it REPRODUCED."""
    rows = [CellResult.from_dict({**cell(f"t-{v}", "matmul[float16-cpu]", o).to_dict(),
                                  "case_id": "probes"})
            for v, o in (("2.0.1", Outcome.REPRODUCED), ("2.2.2", Outcome.PASS),
                         ("2.5.1", Outcome.SKIP))]
    site = build_site(rows, envs("t-2.0.1", "t-2.2.2", "t-2.5.1"), {}, [{}], {})
    assert site.grid is not None
    ((_, package, cells),) = site.grid.rows
    c = cells["cpu"]
    assert (package, c.works, c.missing, c.failed, c.untested) == (
        "torch", ("2.2.2",), ("2.0.1",), (), 1)
    assert c.parts() == (("works", "2.2.2"), ("missing", "2.0.1"))


def test_a_probe_about_two_packages_names_the_combination() -> None:
    """numpy_bridge depends on torch × numpy: one package's versions cannot summarize it."""
    rows = []
    for torch, numpy, outcome in (("2.0.1", "1.26.4", Outcome.PASS),
                                  ("2.0.1", "2.4.6", Outcome.REPRODUCED),
                                  ("2.2.2", "2.4.6", Outcome.REPRODUCED),
                                  ("2.5.1", "2.4.6", Outcome.PASS),
                                  ("2.5.1", "1.26.4", Outcome.PASS)):
        env = f"t-{torch}-{numpy}"
        r = cell(env, "numpy_bridge", outcome).to_dict()
        rows.append(CellResult.from_dict({**r, "case_id": "probes", "fingerprint": {
            "key": {"torch": torch, "numpy": numpy}}}))
    cases = {"probes::numpy_bridge": {"case": "probes", "variant": "numpy_bridge", "requires": [
        {"packages": {"numpy": "", "torch": ""}}]}}
    site = build_site(rows, {r.environment: {"requirements": [], "backend": "uv"}
                             for r in rows}, cases, [{}], {})
    assert site.grid is not None
    ((_, package, cells),) = site.grid.rows
    assert package == "torch × numpy"
    assert cells["cpu"].missing == ("torch 2.0.1, 2.2.2 with numpy 2.4.6",)
    assert cells["cpu"].works == ("torch 2.0.1, 2.5.1 with numpy 1.26.4",
                                  "torch 2.5.1 with numpy 2.4.6")


def test_docstring_markup_reads_as_code_not_raw() -> None:
    """The evo2 page showed ``KeyError: 'recipe'`` with its reStructuredText backticks."""
    cases = {"mk::repro": {**CASES["mk::repro"],
                           "failure": "TE: ``KeyError: 'recipe'`` loading :class:`te.Linear`"}}
    site = build_site([cell("t-2.0.1", "repro", Outcome.REPRODUCED)], envs("t-2.0.1"), cases,
                      [{}], {})
    assert site.failures[0].failure == "TE: `KeyError: 'recipe'` loading `te.Linear`"


def test_the_packages_a_case_is_about_lead_its_table_and_verdict() -> None:
    """llmfoundry-cpu moves torch with llm-foundry: "affected: torch 2.2.1" named the wrong
    package. Case(about=("llm-foundry",)) makes the verdict speak of llm-foundry."""
    results = [
        CellResult(run_id="r", cell_id=f"lf/{lf}", environment=f"lf-{lf}",
                   values={"llm_foundry": lf}, env_key="k", backend="uv", case_id="lf",
                   variant="te_ln_mlp", nodeid="n", hardware_target="cpu", outcome=outcome,
                   fingerprint={"key": {"torch": torch, "llm-foundry": lf}})
        for lf, torch, outcome in (("0.6.0", "2.2.1", Outcome.REPRODUCED),
                                   ("0.7.0", "2.2.1", Outcome.REPRODUCED),
                                   ("0.8.0", "2.3.0", Outcome.PASS))]
    environments = {r.environment: {"requirements": [], "backend": "uv"} for r in results}
    meta = {"case": "lf", "variant": "te_ln_mlp", "failure": "bias twice",
            "signatures": [{"name": "bias-twice"}]}
    for about, verdict, label in (
            ([], ("affected: torch 2.2.1", "not affected: torch ≥ 2.3.0"), "torch 2.2.1"),
            (["llm-foundry"], ("affected: llm-foundry 0.6.0, 0.7.0",
                               "not affected: llm-foundry ≥ 0.8.0"), "llm-foundry 0.6.0")):
        site = build_site(results, environments, {"lf::te_ln_mlp": {**meta, "about": about}},
                          [{"run_id": "r", "created": 0}], {})
        (table,) = site.failures
        assert table.verdict == verdict
        assert table.rows[0].label.startswith(label)


def test_the_site_is_the_same_from_results_and_from_their_lines_decoded() -> None:
    """Results as run/ makes them and as their lines decode (msgspec, against the schema):
    every table, verdict, badge and grid cell the same."""
    results = [cell("t-2.0.1", "repro", Outcome.REPRODUCED),
               cell("t-2.0.1", "workaround[bfloat16]", Outcome.PASS),
               cell("t-2.2.2", "repro", Outcome.PASS),
               cell("t-2.2.2", "workaround[bfloat16]", Outcome.FAIL, reason="still"),
               cell("t-2.3.0", "repro", Outcome.ERROR, reason="uv: no torch", built=False),
               cell("t-2.0.1", "repro", Outcome.NOT_RUN, "sm_90", "no sm_90 here"),
               replace(cell("t-2.0.1", "fp16", Outcome.PASS), case_id="probes"),
               replace(cell("t-2.2.2", "fp16", Outcome.REPRODUCED), case_id="probes")]
    args = (envs("t-2.0.1", "t-2.2.2", "t-2.3.0"), CASES, [{"run_id": "r", "created": 1}],
            {"t-2.0.1/repro/cpu": "logs/a.log"})
    from_results = build_site(results, *args)
    decoded = [msgspec.json.decode(jsonio.dumps(r.to_dict()), type=CellResult) for r in results]
    assert build_site(decoded, *args) == from_results
    assert from_results.failures and from_results.grid and from_results.unbuildable
