"""Answering a release query from an index's file list (pure: no index is asked)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from packaging.version import Version

from harness.core.releases import ReleaseQuery, Target
from harness.matrix.releases import IndexFile, pick, select

LINUX = Target(python="3.11", platform="linux_x86_64")


def wheel(version: str, tag: str = "cp311-cp311-manylinux_2_17_x86_64", *,
          name: str = "torch", **kw: object) -> IndexFile:
    return IndexFile(f"{name}-{version}-{tag}.whl", **kw)  # type: ignore[arg-type]


FILES = [wheel(v) for v in ("1.13.1", "2.0.0", "2.0.1", "2.1.0", "2.1.2", "2.2.0", "2.2.2",
                            "2.3.0", "2.3.1", "2.4.0rc1")]


def test_each_minor_newest_patch_by_default() -> None:
    found = select(ReleaseQuery(dist="torch", releases=">=2.0,<3"), FILES, LINUX)
    assert found.versions == ("2.0.1", "2.1.2", "2.2.2", "2.3.1")
    assert found.left_out == ()


def test_all_and_latest_minor_series() -> None:
    every = select(ReleaseQuery(dist="torch", releases=">=2.2", pick="all"), FILES, LINUX)
    assert every.versions == ("2.2.0", "2.2.2", "2.3.0", "2.3.1")
    newest = select(ReleaseQuery(dist="torch", latest=2), FILES, LINUX)
    assert newest.versions == ("2.2.2", "2.3.1")


def test_pre_releases_only_when_asked() -> None:
    assert "2.4.0rc1" not in select(ReleaseQuery(dist="torch"), FILES, LINUX).versions
    asked = select(ReleaseQuery(dist="torch", pre=True, latest=1), FILES, LINUX)
    assert asked.versions == ("2.4.0rc1",)


def test_a_release_without_a_wheel_for_the_target_is_left_out_and_said() -> None:
    files = [*FILES, wheel("2.5.0", "cp312-cp312-manylinux_2_17_x86_64"),
             wheel("2.5.0", "cp311-cp311-macosx_11_0_arm64")]
    found = select(ReleaseQuery(dist="torch", latest=2), files, LINUX)
    assert found.versions == ("2.2.2", "2.3.1")  # the two newest series it can install
    assert found.left_out == (("2.5.0", "no wheel for cp311 on linux_x86_64 (wheels only "
                                        "for other Pythons or platforms)"),)


def test_requires_python_and_yanked() -> None:
    files = [*FILES, wheel("2.3.2", requires_python=">=3.12"), wheel("2.3.3", yanked=True)]
    found = select(ReleaseQuery(dist="torch", releases=">=2.3"), files, LINUX)
    assert found.versions == ("2.3.1",)
    # 2.3.3 would have been the 2.3 series' pick: said, with why (2.3.2 was never the pick).
    assert dict(found.left_out) == {"2.3.3": "yanked"}
    assert select(ReleaseQuery(dist="torch", releases=">=2.3", yanked=True), files,
                  LINUX).versions == ("2.3.3",)
    older = select(ReleaseQuery(dist="torch", releases="==2.3.2"), files, LINUX)
    assert older.versions == () and older.left_out == (("2.3.2", "requires Python >=3.12"),)


def test_source_only_releases_need_sdist_true() -> None:
    files = [IndexFile("flash_attn-2.5.8.tar.gz"), IndexFile("flash_attn-2.6.3.tar.gz")]
    query = ReleaseQuery(dist="flash-attn")
    assert select(query, files, LINUX).versions == ()
    assert "source only" in dict(select(query, files, LINUX).left_out)["2.6.3"]
    assert select(ReleaseQuery(dist="flash-attn", sdist=True), files,
                  LINUX).versions == ("2.5.8", "2.6.3")


def test_pure_python_wheels_and_other_projects_files() -> None:
    files = [wheel("1.0", "py3-none-any", name="einops"),
             wheel("1.1", "py2-none-any", name="einops"),
             wheel("9.9", "py3-none-any", name="einops_extra"), IndexFile("README.txt")]
    assert select(ReleaseQuery(dist="einops", pick="all"), files, LINUX).versions == ("1.0",)


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5), st.integers(0, 4)),
                min_size=1, max_size=30), st.integers(1, 4))
def test_pick_takes_each_series_newest_of_the_newest_series(
        releases: list[tuple[int, int, int]], latest: int) -> None:
    versions = [Version(".".join(map(str, r))) for r in releases]
    chosen = pick(ReleaseQuery(dist="x", latest=latest), versions)
    series = sorted({(v.major, v.minor) for v in versions})[-latest:]
    assert [(v.major, v.minor) for v in chosen] == series
    assert all(v == max(w for w in versions if (w.major, w.minor) == (v.major, v.minor))
               for v in chosen)


def test_nothing_matches() -> None:
    found = select(ReleaseQuery(dist="torch", releases="<1"), FILES, LINUX)
    assert found.versions == () and found.left_out == ()
