// The operator page's style (inlined, allowed by its hash). Every number sits in a cell of fixed
// width with tabular digits, and controls keep their place (hidden ones by `visibility`), so rows
// do not move while numbers change. Below 900 px rows become cards that never overflow 390 px.
extension OperatorPage {
    static let style = #"""
:root { color-scheme: light dark; --fg: #1b1f24; --muted: #5c6670; --line: #d5dae0; --bg: #fff; --panel: #f5f7f9;
  --accent: #0b62c4; --bar: #d9e2ec; --ok: #1f7a3a; --warn: #9a6700; --bad: #b42318; --idle: #5c6670; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6e9ed; --muted: #9aa4ae; --line: #38404a; --bg: #14171b; --panel: #1c2026;
  --accent: #5aa2f0; --bar: #2b323b; --ok: #4cc16f; --warn: #e0b341; --bad: #f07167; --idle: #9aa4ae; } }
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { margin: 0; font: 15px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); overflow-x: hidden; }
header { display: flex; align-items: baseline; justify-content: space-between; gap: 1rem; padding: .75rem 1rem; border-bottom: 1px solid var(--line); }
h1 { font-size: 1.25rem; margin: 0; }
h2 { font-size: 1rem; margin: 0 0 .4rem; }
main { padding: .75rem 1rem 2rem; max-width: 100%; }
.conn { margin: 0; color: var(--muted); font-size: .875rem; white-space: nowrap; }
.conn.live { color: var(--ok); }
.panel { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: .6rem .75rem; margin-bottom: .75rem; }
label { display: block; font-size: .875rem; color: var(--muted); margin-bottom: .25rem; }
.line { display: flex; flex-wrap: wrap; gap: .4rem; }
.line input { flex: 1 1 14rem; min-width: 0; }
input, select, button, .open { font: inherit; color: inherit; }
input, select { padding: .35rem .5rem; border: 1px solid var(--line); border-radius: 4px; background: var(--bg); }
button, .open { padding: .3rem .7rem; border: 1px solid var(--line); border-radius: 4px; background: var(--bg); cursor: pointer;
  text-decoration: none; display: inline-block; text-align: center; line-height: 1.4; }
button:hover, .open:hover { border-color: var(--accent); }
:focus-visible { outline: 2px solid var(--accent); outline-offset: 1px; }
.error { color: var(--bad); margin: .35rem 0 0; min-height: 1.4em; overflow-wrap: anywhere; }
#notice:empty { display: none; }
.sr { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
table { width: 100%; border-collapse: collapse; table-layout: fixed; }
th { text-align: left; font-size: .8rem; color: var(--muted); font-weight: 600; padding: .3rem .4rem; border-bottom: 1px solid var(--line); white-space: nowrap; overflow: hidden; }
td { padding: .4rem; border-bottom: 1px solid var(--line); vertical-align: middle; white-space: nowrap; overflow: hidden; height: 2.6rem; }
th.state { width: 7.5rem; } th.progress { width: 11rem; } th.num { width: 6.5rem; text-align: right; } th.area { width: 6.5rem; }
th.callers { width: 4.5rem; } th.actions { width: 13.5rem; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.file span { display: block; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.badge { display: inline-block; width: 6.6rem; text-align: center; font-size: .8rem; padding: .1rem 0; border-radius: 999px; border: 1px solid currentColor; }
.badge.queued { color: var(--idle); } .badge.downloading { color: var(--accent); } .badge.paused { color: var(--warn); }
.badge.completed { color: var(--ok); } .badge.failed { color: var(--bad); }
.progress .bar { display: inline-block; vertical-align: middle; width: calc(100% - 4.2rem); height: .55rem; background: var(--bar); border-radius: 999px; overflow: hidden; }
.progress .fill { height: 100%; width: 100%; background: var(--accent); transform-origin: left center; transform: scaleX(0); transition: transform .2s linear; }
.progress .pct { display: inline-block; width: 4rem; text-align: right; font-variant-numeric: tabular-nums; font-size: .85rem; }
.acts { display: flex; gap: .35rem; align-items: center; }
.acts button, .acts .open { width: 4.3rem; padding-left: 0; padding-right: 0; font-size: .85rem; }
.gone { visibility: hidden; }
.empty { color: var(--muted); }
.empty.hidden { display: none; }
@media (max-width: 900px) {
  thead { display: none; }
  table, tbody { display: block; width: 100%; }
  tr { display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: .35rem .5rem; padding: .6rem 0; border-bottom: 1px solid var(--line);
    grid-template-areas: "file file state" "progress progress progress" "rate eta size" "area callers callers" "actions actions actions"; }
  td { display: block; border: 0; padding: 0; height: auto; min-width: 0; }
  td.file { grid-area: file; font-weight: 600; } td.state { grid-area: state; text-align: right; }
  td.progress { grid-area: progress; } td.actions { grid-area: actions; }
  td.rate { grid-area: rate; } td.eta { grid-area: eta; } td.size { grid-area: size; } td.area { grid-area: area; } td.callers { grid-area: callers; }
  td.num, td.area { text-align: left; font-size: .85rem; }
  td.num::before, td.area::before { content: attr(data-label) ": "; color: var(--muted); }
}
"""#
}
