"""The web timeline: server-rendered HTML and a little JavaScript, no build step.

Every user or model text (node names, instructions, outputs, paths) goes through ``esc``: the
page never interprets run data as markup. The run page renders everything on the server; its
script only (1) listens to the run's event stream and re-fetches the page's live section when
something happens, (2) posts the question form, the operator buttons and the rewind box to the
JSON API. Reads are authenticated by the HttpOnly cookie set from ``?token=`` (see app.py); every
POST carries the token in the ``X-Iterion-Token`` header, read from the page's own
``<meta name=iterion-token>``, which a page of another origin cannot read (a readable cookie
could: cookies are shared by every port of a host). docs/technical/web-security.md.

The rewind box sits above the timeline, next to its own "Rewind" button, and shows the dry
run's JSON as the CLI's ``rewind --dry-run`` prints it (restored, removed, skipped, overwritten
edits of yours, left in place, each with its reason); after a rewind it shows what happened and
"Undo this rewind" (POST .../rewind/undo: ``iterion rewind --undo``). Each execution row offers
its own rewind only where the rewind would take it (``row["rewind"]``, set by
``Service.mark_rewinds`` from iterion/rewind/offer.py). The subbot tree (parent link, child runs,
the graph's links) is read from ``subbot_children`` (iterion/store/subbot_tree.py, as ``inspect``).
"""

from __future__ import annotations

import html
import json
from typing import Any
from urllib.parse import quote

from iterion.server import timeline as tl

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d232a;background:#f6f7f9}
header{background:#1d232a;color:#fff;padding:10px 20px}header a{color:#fff;text-decoration:none;font-weight:600}
main{padding:16px 20px;max-width:1200px}h1{font-size:20px;margin:4px 0 12px}h2{font-size:16px;margin:20px 0 8px}
table{border-collapse:collapse;width:100%;background:#fff}th,td{border-bottom:1px solid #e3e6ea;padding:5px 8px;
text-align:left;vertical-align:top}th{background:#eef0f3;font-weight:600}code,pre{font:12px ui-monospace,monospace}
pre{background:#fff;border:1px solid #e3e6ea;padding:8px;overflow:auto;max-height:360px}
.s{padding:1px 6px;border-radius:8px;font-size:12px;background:#e3e6ea}.s-finished{background:#c9f0d3}
.s-failed,.s-failed_resumable{background:#f7cccc}.s-running{background:#cde3fb}.s-paused,.s-paused_waiting_human,
.s-paused_operator{background:#fbecc0}.s-cancelled,.s-interrupted{background:#e6d9f5}
.box{background:#fff;border:1px solid #e3e6ea;padding:10px 12px;margin:8px 0}button{cursor:pointer}
.err{color:#b00020}.muted{color:#68717d}.files{font:12px ui-monospace,monospace}
.warn{background:#fff4d6;border:1px solid #e0b100;padding:6px 10px;margin:6px 0}
#rewind ul{margin:2px 0 6px;padding-left:22px}#rewind h3{font-size:14px;margin:8px 0 2px}
:focus-visible{outline:2px solid #1a73e8;outline-offset:2px}button{min-height:28px}
pre.diff span{display:block;white-space:pre}.d-add{background:#e6f7ea}.d-del{background:#fde8e8}.d-hunk{color:#1a5fb4}
.d-file{font-weight:700;background:#eef0f3}tr.rewound td{color:#68717d;background:#f3f0f8}.s-rewound{background:#e6d9f5}
tr.pause-edits td{background:#fff8e6}.s-edited{background:#ffe3a3}#subbot-children{list-style:none;padding-left:12px}
#subbot-children ul{list-style:none;padding-left:18px}tr.child td:first-child{white-space:nowrap}
details.output pre{max-height:200px;margin:2px 0}#graph svg{display:block}.legend span{margin-right:6px}
#launch label{display:block;margin:4px 0}input,select{max-width:100%;box-sizing:border-box}
@media (max-width:640px){main{padding:10px 8px}table{display:block;overflow-x:auto}header{padding:8px 10px}
#launch input[type=text]{width:100%;box-sizing:border-box}}
"""


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _status(s: Any) -> str:
    return f'<span class="s s-{esc(s)}">{esc(s)}</span>'


def _shell(title: str, body: str, script: str = "") -> str:
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{esc(title)}</title>"
            f"<meta name=viewport content='width=device-width,initial-scale=1'><style>{STYLE}</style></head>"
            f"<body><header><a href='/'>iterion</a> <span class=muted>runs</span></header><main>{body}</main>"
            f"{script}</body></html>")


def login_page(problem: str | None) -> str:
    why = f"<p class=err>{esc(problem)}</p>" if problem else ""
    return _shell("iterion: sign in", f"<h1>Sign in</h1>{why}<p>Open the URL <code>iterion server</code> printed "
                  "(<code>http://HOST:PORT/?token=TOKEN</code>); the page keeps the token in a cookie.</p>")


def error_page(status: int, message: str, hint: str | None) -> str:
    more = f"<p class=muted>{esc(hint)}</p>" if hint else ""
    return _shell(f"iterion: {status}", f"<h1>{status}</h1><p class=err id=error>{esc(message)}</p>{more}")


LAUNCH_SCRIPT = """<script>
(function(){
var token = document.querySelector('meta[name=iterion-token]').getAttribute('content');
var flows = JSON.parse(document.getElementById('workflows').textContent), byFile = {};
flows.forEach(function(w){ byFile[w.file] = w; });
var pick = document.getElementById('launch-file'), box = document.getElementById('launch-vars');
var out = document.getElementById('launch-result');
function show(text, bad){ out.textContent = text; out.className = bad ? 'err' : 'muted'; }
function fields(){
  var w = byFile[pick.value]; box.innerHTML = '';
  if (!w) return;
  if (w.problem) { var p = document.createElement('p'); p.className = 'err'; p.textContent = w.problem; box.appendChild(p); }
  w.vars.forEach(function(v){
    var label = document.createElement('label'), input;
    label.appendChild(document.createTextNode(v.name + ' (' + v.type + (v.required ? ', required' : '') + ') '));
    if (v.type === 'bool') {
      input = document.createElement('select');
      ['', 'true', 'false'].forEach(function(x){ var o = document.createElement('option'); o.value = x;
        o.textContent = x || ('default: ' + v.default); input.appendChild(o); });
    } else {
      input = document.createElement('input'); input.type = 'text';
      if (v.default !== null) input.placeholder = String(v.default);
    }
    input.name = v.name; input.setAttribute('data-type', v.type); if (v.required) input.required = true;
    label.appendChild(input); box.appendChild(label);
  });
}
pick.onchange = fields; fields();
function coerce(t, v){
  if (t === 'bool') return v === 'true';
  if (t === 'int' || t === 'float') { var n = Number(v); return isNaN(n) ? v : n; }
  return v;
}
function send(answers){
  var vars = {}, els = box.querySelectorAll('[name]');
  for (var i = 0; i < els.length; i++) if (els[i].value !== '')
    vars[els[i].name] = coerce(els[i].getAttribute('data-type'), els[i].value);
  fetch('/api/runs', {method:'POST', credentials:'same-origin',
    headers:{'Content-Type':'application/json', 'X-Iterion-Token':token},
    body:JSON.stringify({file:pick.value, vars:vars, answers:answers})})
    .then(function(r){ return r.json().then(function(j){ return {ok:r.ok, body:j}; }); })
    .then(function(r){
      if (!r.ok) { show(r.body.error + (r.body.hint ? ' (' + r.body.hint + ')' : ''), true); return; }
      show('launched run ' + r.body.run_id);
      location.href = '/runs/' + encodeURIComponent(r.body.run_id);
    });
}
document.getElementById('launch').onsubmit = function(ev){
  ev.preventDefault();
  var file = document.getElementById('launch-answers').files[0];
  show('launching…');
  if (!file) { send({}); return; }
  file.text().then(function(t){
    var answers;
    try { answers = JSON.parse(t); } catch (e) { show('the answers file is not JSON: ' + e.message, true); return; }
    if (answers === null || typeof answers !== 'object' || Array.isArray(answers)) {
      show('the answers file must hold a JSON object ({"node": {"field": value}})', true); return; }
    send(answers);
  });
};
})();
</script>"""


def launch_form(workflows: list[dict[str, Any]], executor: str) -> str:
    """The launch form of the run list: a workflow file of the project, its vars, an optional
    answers file (read in the browser, sent as ``answers``); POST /api/runs as the CLI's
    ``iterion remote runs launch``."""
    if not workflows:
        return ("<h2>Launch</h2><p class=muted id=launch-none>No <code>.bot</code> file in the server's project "
                "to launch.</p>")
    options = "".join(f"<option value='{esc(w['file'])}'>{esc(w['file'])}</option>" for w in workflows)
    data = json.dumps(workflows, default=str).replace("<", "\\u003c")  # never closes the script element
    where = "queued for `iterion runner`" if executor == "queue" else "executed by this server"
    return (f"<h2>Launch</h2><form class=box id=launch><label>workflow <select id=launch-file required>{options}"
            f"</select></label><fieldset id=launch-vars><legend>vars</legend></fieldset>"
            "<label>answers file (optional, JSON: <code>{\"node\": {\"field\": value}}</code>) "
            "<input type=file id=launch-answers accept='.json,application/json'></label>"
            f"<button type=submit id=launch-submit>Launch</button> <span class=muted>({esc(where)})</span> "
            f"<span id=launch-result role=status></span></form>"
            f"<script type=application/json id=workflows>{data}</script>")


def _nested(runs: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
    """The rows in list order, each subbot child right under its parent (depth 1, 2...); a child
    whose parent is not on this page stays where it is, marked as a child."""
    shown = {r["id"] for r in runs}
    kids: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        if r.get("parent_run") in shown and r["parent_run"] != r["id"]:
            kids.setdefault(r["parent_run"], []).append(r)
    out: list[tuple[dict[str, Any], int]] = []
    placed: set[str] = set()

    def put(r: dict[str, Any], depth: int) -> None:
        if r["id"] in placed or depth > 8:
            return
        placed.add(r["id"])
        out.append((r, depth))
        for k in sorted(kids.get(r["id"], []), key=lambda k: k["id"]):
            put(k, depth + 1)

    for r in runs:
        if r.get("parent_run") not in shown or r["parent_run"] == r["id"]:
            put(r, 0)
    for r in runs:  # a cycle (never written by iterion): listed anyway
        put(r, 0)
    return out


def _run_row(r: dict[str, Any], depth: int) -> str:
    """One run of the list; a subbot child is indented under its parent and names it."""
    indent = f"<span class=nest style='padding-left:{depth * 14}px'>↳ </span>" if depth else ""
    of = ""
    if r.get("parent_run"):
        of = (f"<div class='muted child-of'>child of <a href='/runs/{esc(r['parent_run'])}'>"
              f"<code>{esc(str(r['parent_run'])[:12])}</code></a> (subbot {esc(r.get('parent_node'))})</div>")
    kind = " class=child" if r.get("parent_run") else ""
    return (f"<tr data-run='{esc(r['id'])}'{kind} data-depth='{depth}'>"
            f"<td>{indent}<a href='/runs/{esc(r['id'])}'><code>{esc(r['id'][:12])}</code></a></td>"
            f"<td>{esc(r['name'])}{of}</td><td>{_status(r['status'])}</td><td>{esc(r['workflow'])}</td>"
            f"<td>{esc((r.get('created_at') or '')[:19].replace('T', ' '))}</td><td>{esc(r.get('failure_code') or '')}</td></tr>")


def index_page(runs: list[dict[str, Any]], workflows: list[dict[str, Any]] | None = None, token: str | None = None,
               executor: str = "local") -> str:
    rows = "".join(_run_row(r, depth) for r, depth in _nested(runs))
    table = ("<table id=runs><thead><tr><th>run</th><th>name</th><th>status</th><th>workflow</th><th>created (UTC)</th>"
             f"<th>failure</th></tr></thead><tbody>{rows}</tbody></table>") if runs else "<p id=runs>No runs yet.</p>"
    if token is None:  # no launch form: the list alone, reloaded
        script = "<script>setTimeout(function(){location.reload()},5000)</script>"
        return _shell("iterion: runs", f"<h1>Runs</h1>{table}", script)
    # the list refreshes itself only while no launch is being filled in (a reload would lose it)
    script = LAUNCH_SCRIPT + ("<script>setInterval(function(){var a=document.activeElement;"
                              "if(!document.getElementById('launch').contains(a))location.reload()},15000)</script>")
    page = _shell("iterion: runs", f"<h1>Runs</h1>{launch_form(workflows or [], executor)}<h2>Recent runs</h2>{table}", script)
    return page.replace("</title>", f"</title><meta name=iterion-token content='{esc(token)}'>", 1)


def _field_input(f: dict[str, Any]) -> str:
    name, typ = esc(f.get("name")), str(f.get("type") or "string")
    # a bool or an enum starts on no value and must be picked: a form submitted as it loaded
    # never approves for the person (issue 34 point 3); `required` stops it in the browser
    blank = "<option value='' selected disabled>choose…</option>"
    if f.get("enum"):
        choices = "".join(f"<option value='{esc(v)}'>{esc(v)}</option>" for v in f["enum"])
        control = f"<select name='{name}' data-type='{esc(typ)}' required>{blank}{choices}</select>"
    elif typ == "bool":
        control = (f"<select name='{name}' data-type=bool required>{blank}<option value=true>true</option>"
                   "<option value=false>false</option></select>")
    elif typ in ("int", "float"):
        control = f"<input name='{name}' data-type='{esc(typ)}' type=number step=any>"
    else:
        control = f"<input name='{name}' data-type='{esc(typ)}' size=50>"
    return f"<label>{name} <span class=muted>({esc(typ)})</span> {control}</label><br>"


REWIND_BOX = ("<h2>Rewind</h2><div class=box id=rewind><p id=rewind-pick>"
              "<select id=rewind-node aria-label='node to rewind to'>{options}</select> "
              "<button id=rewind-preview>Preview rewind</button></p><div id=rewind-report>"
              "<p class=muted>The preview is the dry run of <code>iterion rewind --node NODE</code>: the files it "
              "would restore or remove, your edits it would overwrite, and what it leaves in place.</p></div></div>")


def rewind_box(detail: dict[str, Any]) -> str:
    nodes: list[str] = []
    for x in detail.get("executions") or []:
        offered = (x.get("rewind") or {}).get("offered") if "rewind" in x else (
            x.get("status") in ("finished", "failed", "paused") and not x.get("rewound"))
        if offered and x["node"] not in nodes:
            nodes.append(x["node"])
    options = "".join(f"<option value='{esc(n)}'>{esc(n)}</option>" for n in nodes)
    box = REWIND_BOX.format(options=options or "<option value=''>(no node to rewind to)</option>")
    return box if nodes else box.replace("<p id=rewind-pick>", "<p id=rewind-pick hidden>", 1)


def subbot_section(detail: dict[str, Any]) -> str:
    """Where the run sits in its subbot tree (``iterion inspect``'s tree: iterion/store/subbot_tree.py):
    the parent that launched it, and the child run each of its subbot nodes launched."""
    run = detail["run"]
    out = ""
    if run.get("parent_run"):
        parent = quote(str(run["parent_run"]), safe="")
        out += (f"<p class=box id=parent-run>Child run of <a href='/runs/{esc(parent)}'><code>"
                f"{esc(run['parent_run'])}</code></a>, launched by its subbot node <code>{esc(run.get('parent_node'))}"
                "</code>.</p>")

    def items(children: list[dict[str, Any]]) -> str:
        lis = []
        for c in children:
            href = "/runs/" + quote(str(c.get("run")), safe="")
            status = _status(c["status"]) if c.get("status") else "<span class=muted>not created</span>"
            sub = f"<ul>{items(c['children'])}</ul>" if c.get("children") else ""
            lis.append(f"<li data-node='{esc(c.get('node'))}' data-child='{esc(c.get('run'))}'>subbot <code>"
                       f"{esc(c.get('node'))}</code> → <a href='{esc(href)}'><code>{esc(str(c.get('run'))[:12])}</code> "
                       f"{esc(c.get('name') or '?')}</a> {status}{sub}</li>")
        return "".join(lis)

    children = detail.get("subbot_children") or []
    if children:
        out += f"<h2>Child runs</h2><ul class=box id=subbot-children>{items(children)}</ul>"
    return out


def _pause_row(p: dict[str, Any]) -> str:
    """The person's edits while the run was parked (``pause_edits``): not any node's doing."""
    files = p.get("files") or []
    shown = "".join(f"<div>{esc(f)}</div>" for f in files[:50]) + (
        f"<div class=muted>… {len(files) - 50} more</div>" if len(files) > 50 else "")
    why = "paused" if p.get("stopped") == "pause" else "stopped (failed or cancelled)"
    what = f"you while the run was {why} at {p.get('node')}"
    n = len(files)
    return (f"<tr class=pause-edits data-node='{esc(p.get('node'))}' data-iteration='{esc(p.get('iteration'))}'>"
            f"<td></td><td colspan=5><strong>edited by you</strong> while the run was {esc(why)} at "
            f"<code>{esc(p.get('node'))}</code> ({n} file{'' if n == 1 else 's'})</td>"
            "<td><span class='s s-edited'>your edits</span></td>"
            f"<td class=files>{shown}</td><td><button class=diff data-from='{esc(p.get('from'))}' "
            f"data-to='{esc(p.get('to'))}' data-what='{esc(what)}' aria-controls=diff-panel>diff</button></td></tr>")


def _rewind_cell(x: dict[str, Any], runs_of_node: int) -> str:
    """The row's own rewind (preview, then rewind), or why it offers none (service.mark_rewinds)."""
    offer = x.get("rewind")
    if offer is None:  # a detail without the offers (older callers): the statuses decide
        ok = x.get("status") in ("finished", "failed", "paused") and not x.get("rewound")
        offer = {"offered": ok, "pivot": x["node"], "iteration": x.get("iteration")}
    if offer.get("offered"):
        goes = f" (goes to {offer['pivot']})" if offer.get("pivot") not in (None, x["node"]) else ""
        it = f" to iteration {offer.get('iteration')}" if runs_of_node > 1 and not goes else ""
        return (f"<button class=preview data-node='{esc(x['node'])}' title='preview the rewind to this execution"
                f"{esc(goes)}'>preview rewind{esc(it)}</button>"
                f"{'<span class=muted> ' + esc(goes) + '</span>' if goes else ''}")
    if offer.get("reason") == "not_latest":
        return (f"<span class='muted rewind-note' title='{esc(offer.get('why'))}'>rewind: on iteration "
                f"{esc(offer.get('latest'))}</span>")
    if offer.get("reason") == "refused":
        return f"<span class='muted rewind-note' title='{esc(offer.get('why'))}'>no rewind here</span>"
    return ""


def live_section(detail: dict[str, Any], *, with_rewind: bool = False) -> str:
    """The part of the run page that changes as the run moves (re-fetched by the page's script;
    the rewind box keeps its place: the fragment holds a slot the script puts the live box in)."""
    run = detail["run"]
    rid = esc(run["id"])
    parts: list[str] = []
    head = f"<p id=status>status {_status(run['status'])} · version <span id=version>{esc(run['version'])}</span>"
    if run.get("failure_code") or run.get("error"):
        head += f" · <span class=err>{esc(run.get('failure_code'))}: {esc(run.get('error'))}</span>"
    parts.append(head + "</p>")
    parts.append(subbot_section(detail))
    status = run["status"]
    ops = []
    if status in ("failed_resumable", "cancelled", "paused_operator"):
        ops.append("<button class=op data-action=resume id=op-resume>Resume</button>")
    if status == "running":
        ops.append("<button class=op data-action=pause id=op-pause>Pause</button>")
    if status in ("running", "queued", "paused_waiting_human", "paused_operator", "failed_resumable"):
        ops.append("<button class=op data-action=cancel id=op-cancel>Cancel</button>")
    if ops:
        parts.append(f"<p id=actions>{' '.join(ops)} <span id=op-result></span></p>")
    change = detail.get("source_change")
    if change:
        parts.append(source_change_box(change, status))
    undo = detail.get("undo")
    if undo:  # offered for as long as `rewind --undo` would take it (the run has not moved on)
        touched = ", ".join(undo.get("files") or []) or "no file"
        parts.append(f"<p id=undo-offer class=warn>The last rewind (to {esc(undo['to_node'])}) can be undone: it puts "
                     f"back the checkpoint and the files it changed ({esc(touched)}). "
                     "<button id=rewind-undo>Undo this rewind</button></p>")

    pending = detail.get("pending")
    if pending and run["status"] == "paused_waiting_human":
        q = pending.get("questions") or {}
        asks = q.get("instructions") or q.get("question") or ""
        fields = q.get("fields") or [{"name": "answer", "type": "string"}]
        owner = ""
        child = q.get("subbot") if isinstance(q.get("subbot"), dict) else None
        if child:  # the question is the child run's: answering here resumes the parent, which hands it down
            href = "/runs/" + quote(str(child.get("child_run")), safe="")
            owner = (f"<p class=warn id=question-owner>This question belongs to child run <a href='{esc(href)}'><code>"
                     f"{esc(child.get('child_run'))}</code></a> (its node <code>{esc(child.get('node'))}</code>), "
                     f"launched by this run's subbot node <code>{esc(pending.get('node'))}</code>. Answering here "
                     f"resumes this run, which passes the answers to the child (as <code>iterion resume --run-id "
                     f"{esc(run['id'])}</code> does).</p>")
        if run.get("parent_run") and not child:  # the child's own page: the parent is where it is answered
            href = "/runs/" + quote(str(run["parent_run"]), safe="")
            owner = (f"<p class=warn id=question-parent>This run is the child of run <a href='{esc(href)}'><code>"
                     f"{esc(run['parent_run'])}</code></a> (its subbot node <code>{esc(run.get('parent_node'))}</code>), "
                     "which waits on this same question: answer it on the parent's page so the parent carries on "
                     "with the answer (as <code>iterion resume --run-id PARENT</code> does).</p>")
        parts.append(f"<h2>Waiting on {esc(pending.get('node'))}</h2><div class=box id=question>{owner}"
                     f"<pre class=asks>{esc(asks)}</pre><form id=answer-form data-run='{rid}'>"
                     + "".join(_field_input(f) for f in fields)
                     + ("<label><input type=checkbox id=answer-force> resume with the updated workflow (force)</label><br>"
                        if change else "")
                     + "<button type=submit id=answer-submit>Answer and resume</button> "
                       "<span id=answer-result></span></form></div>")

    hint = run.get("workspace_checkpoint")
    if hint:
        parts.append("<h2>Recovery hint</h2><div class=box id=recovery-hint>"
                     f"<p>latest pushed workspace checkpoint: <code>{esc(hint['ref'])}</code> at "
                     f"<code>{esc(hint['commit'])}</code> (event {esc(hint['seq'])}, {esc(hint['time'])})</p>"
                     f"<pre>{esc(hint['fetch_command'])}\n{esc(hint['verify'])}</pre></div>")

    parts.append(rewind_box(detail) if with_rewind else "<div id=rewind-slot></div>")
    if detail.get("rewind_refused"):
        parts.append(f"<p class=muted id=rewind-refused>No rewind offered: {esc(detail['rewind_refused'])}</p>")

    rows = []
    pauses = sorted((p for p in detail.get("pause_edits") or [] if p.get("files")), key=lambda p: p.get("seq") or 0)
    runs_of: dict[Any, int] = {}
    for x in detail.get("executions") or []:
        runs_of[x["node"]] = runs_of.get(x["node"], 0) + 1
    for i, x in enumerate(detail.get("executions") or []):
        while pauses and (pauses[0].get("seq") or 0) < (x.get("start_seq") or 0):
            rows.append(_pause_row(pauses.pop(0)))
        files = x.get("files") or []
        shown = "".join(f"<div>{esc(p)}</div>" for p in files[:50]) + (
            f"<div class=muted>… {len(files) - 50} more</div>" if len(files) > 50 else "")
        dur = "" if x.get("duration_s") is None else f"{x['duration_s']:.2f}s"
        # warnings of this execution (a tool_output_mismatch...), one line each
        warned = "".join(f"<div class='err warning'>{esc(w.get('code') or 'warning')}: {esc(w.get('message'))}</div>"
                         for w in x.get("warnings") or [])
        rewound = bool(x.get("rewound"))  # its outputs were dropped by a rewind: nothing to rewind to
        preview = _rewind_cell(x, runs_of.get(x["node"], 1))
        art = x.get("artifact")
        if art and art.get("version") is not None:  # read through the API (the page's cookie is enough for a GET)
            href = f"/api/runs/{quote(str(run['id']), safe='')}/artifacts/{quote(str(x['node']), safe='')}/{int(art['version'])}"
            preview += (f" <a class=artifact href='{esc(href)}' target=_blank rel=noopener>"
                        f"artifact {esc(art.get('name'))} v{esc(art['version'])}</a>")
        # opens the /files diff in the panel below: one per stretch the node ran (a pause splits it)
        segs = [g for g in x.get("diff_segments") or [] if g.get("files")]
        if not segs and x.get("diff_from") and x.get("diff_to") and files:
            segs = [{"from": x["diff_from"], "to": x["diff_to"]}]
        for n, g in enumerate(segs):
            name = "diff" if len(segs) == 1 else ("diff before the pause" if n == 0 else "diff after the resume")
            preview += (f" <button class=diff data-from='{esc(g['from'])}' data-to='{esc(g['to'])}' "
                        f"aria-controls=diff-panel>{name}</button>")
        if "output" in x:  # what the execution produced, as its node_finished event recorded it
            text = json.dumps(x["output"], indent=1, ensure_ascii=False, default=str)
            more = f"\n… {len(text) - 4000} more characters" if len(text) > 4000 else ""
            shown += f"<details class=output><summary>output</summary><pre>{esc(text[:4000] + more)}</pre></details>"
        mark = " <span class='s s-rewound'>rewound</span>" if rewound else ""
        rows.append(f"<tr class='execution{' rewound' if rewound else ''}' data-node='{esc(x['node'])}' "
                    f"data-iteration='{esc(x['iteration'])}'>"
                    f"<td>{i + 1}</td><td class=node>{esc(x['node'])}</td><td>{esc(x['iteration'])}</td>"
                    f"<td>{esc(x.get('kind'))}</td><td>{esc((x.get('start') or '')[11:23])}</td><td>{dur}</td>"
                    f"<td>{_status(x['status'])}{mark}{warned}</td><td class=files>{shown}</td><td>{preview}</td></tr>")
    rows.extend(_pause_row(p) for p in pauses)
    parts.append("<h2>Timeline</h2><table id=timeline><thead><tr><th>#</th><th>node</th><th>iteration</th>"
                 "<th>kind</th><th>start</th><th>duration</th><th>status</th><th>files changed</th><th></th></tr>"
                 f"</thead><tbody>{''.join(rows)}</tbody></table>")

    if detail.get("graph_svg"):
        legend = " ".join(f"<span class='s s-{k}'>{k}</span>" for k in ("finished", "running", "paused", "failed",
                                                                       "interrupted", "pending"))
        # drawn by iterion/server/graph.py from the workflow on disk; already escaped there
        parts.append(f"<h2>Graph</h2><div class=box id=graph>{detail['graph_svg']}"
                     f"<p class='legend muted'>{legend}</p></div>")

    cut = tl.truncations((detail.get("checkpoint") or {}).get("outputs"))
    if cut:  # outputs kept whole beside the run, their head inline
        parts.append("<h2>Truncated outputs</h2><table id=truncated><tbody>" + "".join(
            f"<tr><td class=node>{esc(t['node'])}</td><td>{esc(t['stream'])}</td><td>truncated: {esc(t['size'])} "
            f"bytes, first {esc(t['kept'])} shown</td><td><code>{esc(t['path'] or 'not kept')}</code></td></tr>"
            for t in cut) + "</tbody></table>")

    bounds = "".join(f"<tr><td>{esc(b['seq'])}</td><td><code>{esc(b['label'])}</code></td>"
                     f"<td><code>{esc((b.get('state') or '')[:16])}</code></td><td>{esc(b['time'][11:23])}</td></tr>"
                     for b in detail.get("boundaries") or [])
    parts.append(f"<h2>Boundaries</h2><table id=boundaries><thead><tr><th>event</th><th>label</th><th>state</th>"
                 f"<th>time</th></tr></thead><tbody>{bounds}</tbody></table>")
    return "".join(parts)


def source_change_box(change: dict[str, Any], status: str) -> str:
    """The workflow on disk differs from the one the run recorded: what changed, declaration by
    declaration (``rewind --auto --dry-run``'s diff), and the force resume where a resume is open."""
    lines = "".join(f"<li>{esc(c)}</li>" for c in change.get("changes") or [])
    body = f"<ul id=source-changes>{lines}</ul>" if lines else ""
    if change.get("problem"):
        body += f"<p class=muted id=source-problem>the declaration diff is not available: {esc(change['problem'])}</p>"
    if change.get("pivot"):
        body += (f"<p class=muted>a resume keeps every output; <code>iterion rewind --auto</code> would go back to "
                 f"<strong id=source-pivot>{esc(change['pivot'])}</strong> first to replay what the edit affects.</p>")
    button = ""
    if status in ("failed_resumable", "cancelled", "paused_operator"):
        button = "<button class=op data-action=resume data-force=1 id=op-force>Resume with updated workflow (force)</button>"
    elif status == "paused_waiting_human":
        button = "<p class=muted>answer below with \u201cresume with the updated workflow\u201d ticked</p>"
    return (f"<div class=warn id=source-change role=status><strong>The workflow changed since this run recorded it</strong> "
            f"(<code>{esc(change.get('file'))}</code>): a plain resume is refused.{body}{button}</div>")


SCRIPT = """<script>
(function(){
var runId = document.body.getAttribute('data-run'), lastSeq = +document.body.getAttribute('data-seq');
var token = document.querySelector('meta[name=iterion-token]').getAttribute('content');
function show(el, text, bad){ el.textContent = text; el.className = bad ? 'err' : 'muted'; }
function post(path, body){
  return fetch('/api/runs/' + encodeURIComponent(runId) + path, {method:'POST', credentials:'same-origin',
    headers:{'Content-Type':'application/json', 'X-Iterion-Token':token}, body:JSON.stringify(body)})
    .then(function(r){ return r.json().then(function(j){ return {ok:r.ok, status:r.status, body:j}; }); });
}
function errText(b){ return b.error + (b.hint ? ' (' + b.hint + ')' : ''); }
function version(){ var v = document.getElementById('version'); return v ? +v.textContent : undefined; }
var refreshing = false, again = false;
function refresh(){
  if (refreshing) { again = true; return; }
  refreshing = true;
  fetch('/runs/' + encodeURIComponent(runId) + '?fragment=1', {credentials:'same-origin'})
    .then(function(r){ return r.ok ? r.text() : null; })
    .then(function(t){ if (t !== null && !document.getElementById('answer-busy')) {
      var box = document.getElementById('rewind');  // kept as it is: a preview or a result stays on screen
      box.parentNode.removeChild(box);
      document.getElementById('live').innerHTML = t;
      var slot = document.getElementById('rewind-slot');
      slot.parentNode.replaceChild(box, slot);
      bind(); } })
    .finally(function(){ refreshing = false; if (again) { again = false; refresh(); } });
}
function coerce(el){
  var t = el.getAttribute('data-type'), v = el.value;
  if (t === 'bool') return v === 'true';
  if ((t === 'int' || t === 'float') && v !== '') return Number(v);
  return v;
}
function nodeOptions(){
  var sel = document.getElementById('rewind-node'), rows = document.querySelectorAll('button.preview'), seen = {};
  var keep = sel.value, names = [];
  for (var i = 0; i < rows.length; i++) { var n = rows[i].getAttribute('data-node'); if (!seen[n]) { seen[n] = 1; names.push(n); } }
  document.getElementById('rewind-pick').hidden = !names.length;
  if (!names.length) return;
  sel.innerHTML = '';
  names.forEach(function(n){ var o = document.createElement('option'); o.value = n; o.textContent = n; sel.appendChild(o); });
  if (seen[keep]) sel.value = keep;
}
function bind(){
  var form = document.getElementById('answer-form');
  if (form) form.onsubmit = function(ev){
    ev.preventDefault();
    var answers = {}, els = form.querySelectorAll('[name]');
    for (var i = 0; i < els.length; i++) {
      if (els[i].tagName === 'SELECT' && els[i].value === '') continue;  // not picked: the server names it missing
      answers[els[i].name] = coerce(els[i]);
    }
    var out = document.getElementById('answer-result');
    show(out, 'resuming…'); out.id = 'answer-busy';
    var force = document.getElementById('answer-force'), body = {answers:answers, expected_version:version()};
    if (force && force.checked) body.force = true;
    post('/resume', body).then(function(r){
      out.id = 'answer-result';
      show(out, r.ok ? 'answered: the run resumed' : errText(r.body), !r.ok);
      if (r.ok) setTimeout(refresh, 300);
    });
  };
  var ops = document.querySelectorAll('button.op');
  for (var j = 0; j < ops.length; j++) ops[j].onclick = function(){
    var action = this.getAttribute('data-action'), out = document.getElementById('op-result');
    show(out, action + '…');
    var body = action === 'resume' ? {expected_version:version()} : {wait:0, expected_version:version()};
    if (this.getAttribute('data-force')) body.force = true;
    post('/' + action, body)
      .then(function(r){ show(out, r.ok ? action + ': ' + (r.body.status || 'requested') : errText(r.body), !r.ok);
                         // a refusal stays on screen (a refresh would replace it) unless the page is stale
                         if (r.ok || r.body.reason === 'stale_version') setTimeout(refresh, 300); });
  };
  var undo = document.getElementById('rewind-undo');
  if (undo) undo.onclick = function(){ undo.disabled = true; post('/rewind/undo', {}).then(function(y){
    var box = document.getElementById('rewind-report'), p = el('div'); p.id = 'undo-result';
    if (!y.ok) { p.appendChild(el('p', errText(y.body), 'err')); }
    else {  // as `iterion rewind --undo` prints it (cli/rewind.py print_undo)
      p.appendChild(el('p', 'undid the rewind of run ' + y.body.run_id + ' to ' + y.body.to_node + ': checkpoint back at ' +
        (y.body.restored_checkpoint_node || '-') + ', status ' + y.body.status, 'summary'));
      list(p, 'undo-restored', 'put back', y.body.files_restored || []);
      list(p, 'undo-removed', 'removed', y.body.files_removed || []);
      list(p, 'undo-skipped', 'skipped', (y.body.files_skipped || []).map(function(s){ return s.path + ' (' + s.reason + ')'; }));
    }
    box.innerHTML = ''; box.appendChild(p); refresh(); }); };
  var diffs = document.querySelectorAll('button.diff');
  for (var d = 0; d < diffs.length; d++) diffs[d].onclick = function(){
    var row = this.parentNode.parentNode;
    openDiff(this.getAttribute('data-what') ||
             (row.getAttribute('data-node') + ' (iteration ' + row.getAttribute('data-iteration') + ')'),
             this.getAttribute('data-from'), this.getAttribute('data-to'));
  };
  var buttons = document.querySelectorAll('button.preview');
  for (var i = 0; i < buttons.length; i++) buttons[i].onclick = function(){
    document.getElementById('rewind-node').value = this.getAttribute('data-node');
    preview(this.getAttribute('data-node'));
  };
  nodeOptions();
}
// an execution's file diff (GET .../files), one line per element: + added, - removed, @@ hunks
function openDiff(what, from, to){
  var panel = document.getElementById('diff-panel'), out = document.getElementById('diff-body');
  document.getElementById('diff-title').textContent = 'Files changed by ' + what;
  panel.hidden = false; out.innerHTML = ''; out.appendChild(el('p', 'loading the diff…', 'muted'));
  fetch('/api/runs/' + encodeURIComponent(runId) + '/files?from=' + encodeURIComponent(from) + '&to=' +
        encodeURIComponent(to), {credentials:'same-origin'})
    .then(function(r){ return r.json().then(function(j){ return {ok:r.ok, body:j}; }); })
    .then(function(r){
      out.innerHTML = '';
      if (!r.ok) { out.appendChild(el('p', errText(r.body), 'err')); return; }
      var files = el('ul'); files.id = 'diff-files';
      (r.body.files || []).forEach(function(f){ files.appendChild(el('li', f.kind + ' ' + f.path)); });
      out.appendChild(files);
      var pre = el('pre', undefined, 'diff'); pre.id = 'diff-text'; pre.tabIndex = 0;
      (r.body.diff || '').split('\\n').forEach(function(line){
        var c = line.indexOf('+++') === 0 || line.indexOf('---') === 0 || line.indexOf('diff ') === 0 ? 'd-file'
              : line[0] === '+' ? 'd-add' : line[0] === '-' ? 'd-del' : line.indexOf('@@') === 0 ? 'd-hunk' : '';
        pre.appendChild(el('span', line, c));
      });
      if (!r.body.diff) pre.appendChild(el('span', '(no text difference: binary or mode changes only)'));
      out.appendChild(pre);
      if (r.body.truncated) out.appendChild(el('p', 'the diff is truncated', 'warn'));
      panel.focus();
    });
}
document.getElementById('diff-close').onclick = function(){ document.getElementById('diff-panel').hidden = true; };
function el(tag, text, cls){ var e = document.createElement(tag); if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls; return e; }
function list(parent, id, title, items, cls){
  if (!items.length) return;
  parent.appendChild(el('h3', title + ' (' + items.length + ')'));
  var ul = el('ul'); ul.id = id; if (cls) ul.className = cls;
  items.forEach(function(t){ ul.appendChild(el('li', t)); });
  parent.appendChild(ul);
}
function reasonOf(f, p){
  var d = (f.left_in_place_details || []).filter(function(x){ return x.path === p; })[0];
  return d && d.run_id ? 'produced by run ' + d.run_id + ', another run of this workspace'
                       : 'changed since the run\u2019s last boundary, outside the scope';
}
// the same lists, words and reasons as `iterion rewind` prints (cli/rewind.py _print_files)
function report(box, body, dry){
  var f = body.files || {}, w = dry ? 'would be ' : '';
  var head = (dry ? 'dry run: would rewind' : 'rewound') + ' run ' + body.run_id + ': ' + (body.from_node || '-') +
    ' -> ' + body.to_node + (body.promoted_from ? ' (promoted from ' + body.promoted_from + ': the whole fan-out replays)' : '');
  box.appendChild(el('p', head, 'summary'));
  box.appendChild(el('p', 'dropped outputs: ' + (body.dropped_nodes || []).join(', ')));
  box.appendChild(el('p', 'files (' + f.mechanism + ', scope ' + f.scope + ', to ' + f.anchor + ')', 'muted'));
  if (f.skip_reason) box.appendChild(el('p', 'nothing restored: ' + f.skip_reason, 'warn'));
  if ((f.overwritten || []).length) {
    var warn = el('div', undefined, 'warn'); warn.id = 'rewind-overwritten-box';
    warn.appendChild(el('strong', (dry ? 'Your edits this rewind would overwrite' : 'Your edits this rewind overwrote') +
      ' (not attributable to the run: changed after it stopped recording, or while its process was dead; ' +
      (dry ? 'the pre-rewind state is banked first, and "Undo this rewind" brings them back)' : 'kept in ' + f.backup_ref + ')')));
    var ul = el('ul'); ul.id = 'rewind-overwritten';
    f.overwritten.forEach(function(p){ ul.appendChild(el('li', p)); });
    warn.appendChild(ul); box.appendChild(warn);
  }
  list(box, 'rewind-restored', w + 'restored', f.restored || []);
  list(box, 'rewind-removed', w + 'removed', f.removed || []);
  list(box, 'rewind-skipped', w + 'skipped', (f.skipped || []).map(function(s){ return s.path + ' (' + s.reason + ')'; }));
  list(box, 'rewind-left', w + 'left in place', (f.left_in_place || []).map(function(p){ return p + ' (' + reasonOf(f, p) + ')'; }));
  if (!(f.restored || []).length && !(f.removed || []).length && !f.skip_reason)
    box.appendChild(el('p', 'no file ' + w + 'restored or removed', 'muted'));
  (body.warnings || []).forEach(function(t){ box.appendChild(el('p', t, 'warn')); });
}
function preview(node){
  var box = document.getElementById('rewind-report');
  box.innerHTML = '';
  box.appendChild(el('p', 'computing the rewind preview…', 'muted'));
  post('/rewind', {node:node, dry_run:true}).then(function(r){
    box.innerHTML = '';
    if (!r.ok) { box.appendChild(el('p', errText(r.body), 'err')); return; }
    var b = el('button', 'Rewind to ' + node); b.id = 'rewind-do';
    var at = version();
    b.onclick = function(){ b.disabled = true; post('/rewind', {node:node, expected_version:at}).then(function(x){
      box.innerHTML = '';
      if (!x.ok) { var p = el('p', errText(x.body), 'err'); p.id = 'rewind-result'; box.appendChild(p); return; }
      var res = el('div'); res.id = 'rewind-result'; report(res, x.body, false); box.appendChild(res);
      refresh(); }); };  // the refreshed live section offers "Undo this rewind" (#undo-offer)
    var bar = el('p'); bar.appendChild(b); box.appendChild(bar);
    var rep = el('div'); rep.id = 'rewind-preview-report'; report(rep, r.body, true); box.appendChild(rep);
  });
}
document.getElementById('rewind-preview').onclick = function(){
  var n = document.getElementById('rewind-node').value; if (n) preview(n); };
bind();
if (window.EventSource) {
  var es = new EventSource('/api/runs/' + encodeURIComponent(runId) + '/events?follow=1&until=never&after=' + lastSeq);
  es.onmessage = refresh;
  ['node_started','node_finished','node_failed','run_paused','run_finished','run_failed','run_cancelled',
   'run_resumed','run_rewound','run_rewind_undone','human_input_requested','boundary_written',
   'run_workspace_checkpoint'].forEach(function(t){ es.addEventListener(t, refresh); });
}
})();
</script>"""


def run_page(detail: dict[str, Any], token: str) -> str:
    """``token`` goes in a meta tag for the page's own script to send in a header (module doc)."""
    run = detail["run"]
    body = (f"<h1>{esc(run['name'])} <span class=muted>{esc(run['workflow_name'])}</span></h1>"
            f"<p class=muted>run <code>{esc(run['id'])}</code> · workspace <code>{esc(run['workspace_dir'])}</code> "
            f"({esc(run['workspace_mode'])})</p>"
            f"<div id=live>{live_section(detail, with_rewind=True)}</div>"
            # outside the live section: an open diff stays while the run moves
            "<section id=diff-panel class=box hidden tabindex=-1 aria-labelledby=diff-title><h2 id=diff-title>diff</h2>"
            "<button id=diff-close>Close diff</button><div id=diff-body></div></section>")
    page = _shell(f"iterion: {run['name']}", body, SCRIPT)
    page = page.replace("</title>", f"</title><meta name=iterion-token content='{esc(token)}'>", 1)
    return page.replace("<body>", f"<body data-run='{esc(run['id'])}' data-seq='{int(detail.get('last_seq') or 0)}'>", 1)
