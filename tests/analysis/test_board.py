"""The reliability board (issue 29): one analysis per group — the same numbers as analysing the group alone, on
every engine —, Holm-adjusted pairwise differences, simultaneous rank intervals, cards, renderers."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from board_data import configs

import tracetochain as tt
from tracetochain.analysis._board import board, pairwise_and_ranks, trace_table_sha256
from tracetochain.readers._many import read_corpus
from tracetochain.report._board import (
    board_card_markdown,
    board_csv,
    board_svg,
    render_board_html,
    render_board_markdown,
)

SECURITY = Path(__file__).resolve().parents[1] / "data" / "board" / "security"
FAST = {"samples": 200, "n_bootstrap": 50, "audit": False}


def test_pairwise_and_ranks_properties() -> None:
    diffs, ranks = pairwise_and_ranks(["a", "b", "c", "d"], [0.9, 0.7, 0.5, 0.3], [1e-4] * 4)
    assert ranks == [(1, 1), (2, 2), (3, 3), (4, 4)] and all(d.significant for d in diffs)
    diffs, ranks = pairwise_and_ranks(["a", "b", "c"], [0.5, 0.5, 0.5], [0.1] * 3)
    assert ranks == [(1, 3)] * 3 and not any(d.significant for d in diffs)
    assert all(d.p_adjusted >= d.p_value for d in diffs)
    rng = np.random.default_rng(1)
    for _ in range(50):  # every rank interval holds the group's own position in the point order
        pts = rng.random(6)
        order = np.argsort(-pts)
        _, ranks = pairwise_and_ranks([str(i) for i in order], pts[order].tolist(), (rng.random(6) * 0.1).tolist())
        assert all(lo <= pos + 1 <= hi for pos, (lo, hi) in enumerate(ranks))


def test_each_row_is_the_analysis_of_its_group_alone() -> None:
    corpus = read_corpus(SECURITY)
    b = board(corpus, by="meta.defense", where=["metadata.attack_type=none"], ks=(1, 3), seed=3, **FAST)
    assert b.filters == ["metadata.attack_type=none"] and len(b.rows) == 3
    for row in b.rows:
        alone = corpus.where(["metadata.attack_type=none", f"meta.defense={row.group}"])
        res = tt.analyze(alone, audit=False, samples=200, seed=3)
        assert row.r_inf == pytest.approx(res.chain.r_inf, abs=1e-12)
        assert row.n_episodes == res.summary.n_usable and row.pass_rate == pytest.approx(res.pass_rate)
        iv = res.intervals(horizon=10, ks=(1, 3))["metrics"]["r_inf"]
        assert row.r_inf_interval == (iv["lower"], iv["upper"])
        assert row.sha256 == trace_table_sha256(alone)
        assert row.run_metadata and all(name.endswith(".jsonl") for name in row.run_metadata)
    assert [r.rank for r in b.rows] == [1, 2, 3] and b.rows[0].r_inf >= b.rows[-1].r_inf


def test_the_local_engine_gives_the_same_board() -> None:
    table = configs(3, seed=5, tasks=8, trials=2)
    mem = board(table, by="config", ks=(1, 2), **FAST)
    local = board(table, by="config", engine="local", ks=(1, 2), **FAST)
    for a, b in zip(mem.rows, local.rows, strict=True):
        assert a.group == b.group and a.rank_interval == b.rank_interval
        assert a.r_inf == pytest.approx(b.r_inf, abs=1e-12)
        assert a.r_inf_interval == pytest.approx(b.r_inf_interval, abs=1e-12)
        assert a.pass_hat_k == b.pass_hat_k
    assert [p.p_adjusted for p in mem.pairs] == pytest.approx([p.p_adjusted for p in local.pairs], abs=1e-12)


@pytest.fixture(scope="module")
def ten() -> tt.analysis._board.Board:  # type: ignore[name-defined]
    return board(configs(10), by="config", ks=(1, 3), **FAST)


def test_ten_configurations_json_one_row_per_group(ten) -> None:
    doc = ten.to_dict()
    json.dumps(doc, allow_nan=False)
    assert doc["kind"] == "tracetochain.board" and doc["schema_version"] == 1
    assert len(doc["rows"]) == 10 and len({r["group"] for r in doc["rows"]}) == 10
    assert len(doc["pairs"]) == 45 and "Holm" in doc["multiplicity"]
    row = doc["rows"][0]
    assert row["pass_hat_k"]["3"]["estimator"].startswith("per-task unbiased")  # tasks repeat
    assert row["planning"]["icc"]["icc"] is not None and row["design_effect"] >= 1.0
    assert row["cost_per_success"] == pytest.approx(
        next(0.01 * (int(g[-2:] if not g.endswith("</b>") else 0) + 1) for g in [row["group"]]) * row["n_episodes"]
        / row["n_success"])
    # stronger configurations come first in this design; the board finds some order with confidence
    assert sum(p["significant"] for p in doc["pairs"]) >= 5
    card = ten.card(ten.groups[0])
    assert card["kind"] == "tracetochain.reliability_card" and len(card["trajectories"]["sha256"]) == 64
    assert card["numbers"]["rank_interval"] == list(ten.rows[0].rank_interval)
    assert "sha256" in board_card_markdown(card)


def test_renderers_escape_and_carry_the_statement(ten) -> None:
    doc = ten.to_dict()
    html = render_board_html(doc)
    assert "<b>cfg00</b>" not in html and "&lt;b&gt;cfg00&lt;/b&gt;" in html
    assert "Multiplicity" in html and "Holm" in html and "<svg" in html and "<script" not in html
    assert html.count('class="rank-interval"') == 10
    md = render_board_markdown(doc)
    assert md.count("\n| ") >= 11 and "Holm" in md
    rows = list(csv.DictReader(io.StringIO(board_csv(doc))))
    assert len(rows) == 10 and {"rank_lower", "rank_upper", "r_inf_lower", "pass^3"} <= set(rows[0])
    assert board_svg(doc).count("<circle") == 10


def test_bad_requests_are_clear() -> None:
    table = configs(2, tasks=3, trials=1)
    with pytest.raises(tt.exceptions.TraceValidationError, match="no field 'nope'"):
        board(table, by="nope", **FAST)
    with pytest.raises(ValueError, match="intervals"):
        board(table, by="config", intervals="none", **{k: v for k, v in FAST.items()})
