"""`presk explain --format html`: one self-contained page (inline CSS and script, nothing
fetched): the program's source beside the decisions, each decision's stages one click
away (`details` elements), its source line marked when the decision is opened."""

from __future__ import annotations

from html import escape

from presk.precision.explain import (
    Decision,
    Explanation,
    SiteStages,
    brief,
    computed,
    figures_lines,
)

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #222; }
header { padding: 8px 16px; background: #f3f3f3; border-bottom: 1px solid #ccc; }
header h1 { font-size: 16px; margin: 0 0 4px; }
main { display: flex; height: calc(100vh - 92px); }
#source { flex: 0 0 42%; overflow: auto; border-right: 1px solid #ccc; margin: 0;
  padding: 8px 0; background: #fbfbfb; }
#source span { display: block; padding: 0 8px; white-space: pre; }
#source span::before { content: attr(data-n); display: inline-block; width: 3em;
  color: #999; }
#source span.mark { background: #fff2a8; }
#decisions { flex: 1; overflow: auto; padding: 8px 16px; }
details { margin: 4px 0; }
summary { cursor: pointer; font-family: ui-monospace, monospace; }
.rung { font-weight: bold; }
.f64 { color: #555; } .f32 { color: #1f6fb2; } .bf16 { color: #b2401f; }
ol { margin: 4px 0 4px 1.5em; padding: 0; }
pre.stage { background: #f6f6f6; padding: 6px; overflow: auto; margin: 2px 0 6px; }
.why { color: #444; }
"""

# Opening a decision marks its source line and scrolls the source to it.
SCRIPT = """
document.querySelectorAll("details.decision").forEach(function (d) {
  d.addEventListener("toggle", function () {
    document.querySelectorAll("#source span.mark").forEach(function (s) {
      s.classList.remove("mark");
    });
    var line = d.open ? document.getElementById(d.dataset.line) : null;
    if (line) { line.classList.add("mark"); line.scrollIntoView({block: "center"}); }
  });
});
"""


def page(ex: Explanation) -> str:
    """The whole page."""
    head = (
        f"<h1>presk explain: <code>{escape(ex.entry)}</code> of {escape(ex.file)} under "
        f"{escape(ex.realization)}</h1>"
        + "".join(f"<div>{escape(line)}</div>" for line in figures_lines(ex))
    )
    decisions = "\n".join(_decision(d, ex) for d in ex.decisions)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>presk explain: {escape(ex.entry)}</title><style>{STYLE}</style></head>"
        f"<body><header>{head}</header><main>"
        f'<pre id="source">{_source(ex.source)}</pre>'
        f'<section id="decisions">{decisions}</section>'
        f"</main><script>{SCRIPT}</script></body></html>\n"
    )


def _source(text: str) -> str:
    return "".join(
        f'<span id="L{n}" data-n="{n}">{escape(line)}</span>'
        for n, line in enumerate(text.splitlines(), 1)
    )


def _decision(d: Decision, ex: Explanation) -> str:
    saves = "" if d.saves is None else f" saves {d.saves} bytes"
    term = "" if d.term is None else f" term {brief(d.term)}"
    summary = f'{escape(d.key)} ({d.kind}) <span class="rung {d.rung}">{d.rung}</span>{saves}{term}'
    why = "".join(f"<li>{escape(s)}</li>" for s in d.why(ex.figures))
    body = [f'<ol class="why">{why}</ol>']
    line = ""
    if d.place is not None:
        file, _, number = (d.place.where or "").rpartition(":")
        if file == ex.file:  # a line of the source shown (not the prelude's)
            line = "L" + number
        body.append(
            f"<div>at {escape(d.place.where or '?')}: <code>{escape(d.place.line or '')}</code>"
            f"</div><div>core: <code>{escape(d.place.op or '')}</code></div>"
        )
    stages = next((st for st in ex.stages.values() if st.root == d.key), None)
    if stages is not None:
        body.append(_stages(stages))
    return (
        f'<details class="decision" data-line="{line}"><summary>{summary}</summary>'
        + "".join(body)
        + "</details>"
    )


def _stages(st: SiteStages) -> str:
    parts = []
    if st.root != st.site and st.place is not None:  # a fused member: its own place
        parts.append((f"site {st.site}", f"{st.place.where}: {st.place.line}\n{st.place.op}"))
    if st.kernel is not None:
        parts += [
            (f"site {st.site}{computed(st)}", st.kernel_text),
            ("affine", st.affine),
            ("llvm", st.llvm),
            ("machine code", st.machine),
        ]
    elif st.host is not None:
        parts.append((f"site {st.site}{computed(st)}", st.host))
    else:
        return f"<div>{escape(f'site {st.site}{computed(st)}')}</div>"
    return "".join(
        f'<details class="stage"><summary>{escape(name)}</summary>'
        f'<pre class="stage">{escape(body)}</pre></details>'
        for name, body in parts
    )
