"""Report figures as inline SVG: the R(d) curve with its band and the empirical RDC, the success first-passage
histogram against the model, R within a cost budget against the observed spend, and the monitor's R∞ per window.
Inputs are report-document sections only.

With matplotlib installed (the ``plots`` extra: ``pip install "tracetochain[plots]"``) the figures are drawn by it
(Agg backend). Without it they come from :mod:`tracetochain.report._svgplot`, a small built-in SVG chart with the
same series, colours and labels: a default install still writes complete reports, and matplotlib (~100 MB with
its dependencies) is only needed for its typesetting.
"""

from __future__ import annotations

import importlib.util
import io
from typing import Any

from tracetochain.report._svgplot import Chart

_STYLE: dict[Any, Any] = {"figure.figsize": (7.2, 3.6), "font.size": 9, "axes.spines.top": False,
                          "axes.spines.right": False, "svg.fonttype": "none", "svg.hashsalt": "tracetochain"}


def _short(reason: str, limit: int = 90) -> str:
    reason = reason.rstrip(".")
    return reason if len(reason) <= limit else reason[: limit - 1] + "…"


#: What a plot of success times says when there is no successful trace to draw.
NO_SUCCESS_NOTE = "no trace succeeded: there is no time to success to show"


def _no_success_note(curve: dict[str, Any], empirical: list[float] | None) -> str | None:
    """The note for an R(d) plot with nothing on it: no observed success and a model that never succeeds."""
    observed_none = empirical is None or not any(empirical)
    model_none = not curve.get("r_inf")
    return "no trace succeeded and the model's R∞ is 0: R(d) is 0 for every d" if observed_none and model_none \
        else None


def _integer_axis(axis: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _note(ax: Any, text: str | None) -> None:
    if text:
        ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="#57606a", fontsize=9)


def have_matplotlib() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    import matplotlib.pyplot as plt

    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog and DOCTYPE so the SVG can be inlined in HTML


def reliability_svg(curve: dict[str, Any], empirical: list[float] | None, *, withheld_reason: str | None) -> str:
    """R(d) with its band (when present) and the empirical RDC; when timing is withheld only the data are drawn."""
    if not have_matplotlib():
        d = list(range(len(curve["R"])))
        chart = Chart(xlabel="step budget d", ylabel="P(success within d steps)", ylim=(0, 1),
                      xlim=(0, max(d) if d else 1), integer_x=True, note=_no_success_note(curve, empirical),
                      title=None if withheld_reason is None else f"model R(d) withheld: {_short(withheld_reason)}")
        if withheld_reason is None:
            if curve.get("lower") is not None and curve.get("upper") is not None:
                chart.band(d, curve["lower"], curve["upper"], color="#0969da",
                           label=f"{curve.get('level', 0.95):.0%} band")
            chart.line(d, curve["R"], color="#0969da", label="model R(d)")
            if curve.get("r_inf") is not None:
                chart.hline(curve["r_inf"], color="#0969da", label="model R∞")
        if empirical is not None:
            chart.step(range(len(empirical)), empirical, color="#1a7f37", label="observed (RDC)")
        return chart.svg()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots()
        d = list(range(len(curve["R"])))
        if withheld_reason is None:
            if curve.get("lower") is not None and curve.get("upper") is not None:
                ax.fill_between(d, curve["lower"], curve["upper"], color="#0969da", alpha=0.18, linewidth=0,
                                label=f"{curve.get('level', 0.95):.0%} band")
            ax.plot(d, curve["R"], color="#0969da", label="model R(d)")
            if curve.get("r_inf") is not None:
                ax.axhline(curve["r_inf"], color="#0969da", linestyle=":", linewidth=1, label="model R∞")
        else:
            ax.set_title(f"model R(d) withheld: {_short(withheld_reason)}", color="#9a6700", fontsize=9, loc="left")
        if empirical is not None:
            ax.step(range(len(empirical)), empirical, where="post", color="#1a7f37", label="observed (RDC)")
        ax.set_xlabel("step budget d")
        ax.set_ylabel("P(success within d steps)")
        ax.set_ylim(0, 1)
        ax.set_xlim(0, max(d) if d else 1)
        _integer_axis(ax.xaxis)
        _note(ax, _no_success_note(curve, empirical))
        ax.legend(loc="lower right", frameon=False)
        return _svg(fig)


def fpt_svg(counts: list[int], model_pmf: list[float] | None, *, withheld_reason: str | None) -> str:
    """Histogram of success lengths (``counts[k]`` successful traces of k steps), with the model's
    success-conditional PMF scaled to the same count."""
    n = int(sum(counts))
    if not have_matplotlib():
        chart = Chart(xlabel="steps to success", ylabel="traces", legend="upper right", integer_x=True,
                      integer_y=True, note=None if n else NO_SUCCESS_NOTE, xlim=None if n else (0, 1),
                      ylim=None if n else (0, 1),
                      title=None if withheld_reason is None else f"model timing withheld: {_short(withheld_reason)}")
        if n:
            chart.bars(range(len(counts)), counts, color="#1a7f37", label="observed successes")
        if model_pmf is not None and withheld_reason is None and n:
            chart.line(range(len(model_pmf)), [p * n for p in model_pmf], color="#0969da", label="model (scaled)")
        return chart.svg()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots()
        if n:
            ax.bar(range(len(counts)), counts, width=1.0, align="edge", color="#1a7f37", alpha=0.55,
                   label="observed successes")
        if model_pmf is not None and withheld_reason is None and n:
            ax.plot(range(len(model_pmf)), [p * n for p in model_pmf], color="#0969da", label="model (scaled)")
        if withheld_reason is not None:
            ax.set_title(f"model timing withheld: {_short(withheld_reason)}", color="#9a6700", fontsize=9,
                         loc="left")
        ax.set_xlabel("steps to success")
        ax.set_ylabel("traces")
        _integer_axis(ax.xaxis)
        _integer_axis(ax.yaxis)
        if n:
            ax.legend(loc="upper right", frameon=False)
        else:
            _note(ax, NO_SUCCESS_NOTE)
        return _svg(fig)


def budget_svg(budget: dict[str, Any], band: dict[str, Any] | None, observed: list[float] | None, *,
               withheld_reason: str | None) -> str:
    """R(B): success before the accumulated cost exceeds B, the model's curve (with its band) against the share of
    observed episodes that succeeded within B."""
    unit = budget["unit"]
    if not have_matplotlib():
        b = budget["budgets"]
        chart = Chart(xlabel=f"budget B ({unit}, {budget['metric']})", ylabel="P(success within budget B)",
                      ylim=(0, 1), xlim=(0, b[-1] if b else 1),
                      title=None if withheld_reason is None else f"model R(B) withheld: {_short(withheld_reason)}")
        if withheld_reason is None:
            if band and band.get("budgets"):
                chart.band(band["budgets"], band["lower"], band["upper"], color="#0969da",
                           label=f"{band.get('confidence', 0.95):.0%} band")
            chart.line(b, budget["reliability"], color="#0969da", label="model R(B)")
            chart.hline(budget["r_inf"], color="#0969da", label="model R∞")
        if observed is not None:
            chart.step(b, observed, color="#1a7f37", label="observed")
        return chart.svg()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots()
        b = budget["budgets"]
        if withheld_reason is None:
            if band and band.get("budgets"):
                ax.fill_between(band["budgets"], band["lower"], band["upper"], color="#0969da", alpha=0.18,
                                linewidth=0, label=f"{band.get('confidence', 0.95):.0%} band")
            ax.plot(b, budget["reliability"], color="#0969da", label="model R(B)")
            ax.axhline(budget["r_inf"], color="#0969da", linestyle=":", linewidth=1, label="model R∞")
        else:
            ax.set_title(f"model R(B) withheld: {_short(withheld_reason)}", color="#9a6700", fontsize=9, loc="left")
        if observed is not None:
            ax.step(b, observed, where="post", color="#1a7f37", label="observed")
        ax.set_xlabel(f"budget B ({unit}, {budget['metric']})")
        ax.set_ylabel("P(success within budget B)")
        ax.set_ylim(0, 1)
        ax.set_xlim(0, b[-1] if b else 1)
        ax.legend(loc="lower right", frameon=False)
        return _svg(fig)


def monitor_svg(windows: list[dict[str, Any]]) -> str:
    """R∞ per window with its interval, alert windows marked; the observed pass rate for reference."""
    if not have_matplotlib():
        chart = Chart(xlabel="window", ylabel="P(success)", ylim=(0, 1), legend="lower left")
        x = [w["index"] for w in windows]
        chart.band(x, [w["r_inf_lower"] for w in windows], [w["r_inf_upper"] for w in windows], color="#0969da",
                   label="R∞ interval")
        chart.line(x, [w["r_inf"] for w in windows], color="#0969da", label="R∞", markers=True)
        chart.line(x, [w["pass_rate"] for w in windows], color="#1a7f37", label="observed pass rate", dash=True)
        alerts = [w for w in windows if w["alert"]]
        if alerts:
            chart.rings([w["index"] for w in alerts], [w["r_inf"] for w in alerts], color="#cf222e",
                        label="drift alert")
        return chart.svg()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots()
        x = [w["index"] for w in windows]
        r = [w["r_inf"] for w in windows]
        ax.fill_between(x, [w["r_inf_lower"] for w in windows], [w["r_inf_upper"] for w in windows],
                        color="#0969da", alpha=0.18, linewidth=0, label="R∞ interval")
        ax.plot(x, r, marker="o", color="#0969da", label="R∞")
        ax.plot(x, [w["pass_rate"] for w in windows], linestyle=":", color="#1a7f37", label="observed pass rate")
        alerts = [w for w in windows if w["alert"]]
        if alerts:
            ax.scatter([w["index"] for w in alerts], [w["r_inf"] for w in alerts], s=90, facecolors="none",
                       edgecolors="#cf222e", linewidths=2, label="drift alert", zorder=3)
        ax.set_xlabel("window")
        ax.set_ylabel("P(success)")
        ax.set_ylim(0, 1)
        ax.legend(loc="lower left", frameon=False)
        return _svg(fig)
