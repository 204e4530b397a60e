"""The web timeline: server-rendered HTML and a little JavaScript, no build step.

Every user or model text (node names, instructions, outputs, paths) goes through ``esc``: the
page never interprets run data as markup. The run page renders everything on the server; its
script only (1) listens to the run's event stream and re-fetches the page's live section when
something happens, (2) posts the question form and the rewind buttons to the JSON API. The
browser is authenticated by the HttpOnly cookie set from ``?token=`` (see app.py).
"""

from __future__ import annotations

import html
from typing import Any

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


def index_page(runs: list[dict[str, Any]]) -> str:
    rows = "".join(
        f"<tr data-run='{esc(r['id'])}'><td><a href='/runs/{esc(r['id'])}'><code>{esc(r['id'][:12])}</code></a></td>"
        f"<td>{esc(r['name'])}</td><td>{_status(r['status'])}</td><td>{esc(r['workflow'])}</td>"
        f"<td>{esc((r.get('created_at') or '')[:19].replace('T', ' '))}</td><td>{esc(r.get('failure_code') or '')}</td></tr>"
        for r in runs)
    table = ("<table id=runs><thead><tr><th>run</th><th>name</th><th>status</th><th>workflow</th><th>created (UTC)</th>"
             f"<th>failure</th></tr></thead><tbody>{rows}</tbody></table>") if runs else "<p id=runs>No runs yet.</p>"
    script = "<script>setTimeout(function(){location.reload()},5000)</script>"
    return _shell("iterion: runs", f"<h1>Runs</h1>{table}", script)


def _field_input(f: dict[str, Any]) -> str:
    name, typ = esc(f.get("name")), str(f.get("type") or "string")
    if typ == "bool":
        control = (f"<select name='{name}' data-type=bool><option value=true>true</option>"
                   "<option value=false>false</option></select>")
    elif typ in ("int", "float"):
        control = f"<input name='{name}' data-type='{esc(typ)}' type=number step=any>"
    else:
        control = f"<input name='{name}' data-type='{esc(typ)}' size=50>"
    return f"<label>{name} <span class=muted>({esc(typ)})</span> {control}</label><br>"


def live_section(detail: dict[str, Any]) -> str:
    """The part of the run page that changes as the run moves (re-fetched by the page's script)."""
    run = detail["run"]
    rid = esc(run["id"])
    parts: list[str] = []
    head = f"<p id=status>status {_status(run['status'])} · version <span id=version>{esc(run['version'])}</span>"
    if run.get("failure_code") or run.get("error"):
        head += f" · <span class=err>{esc(run.get('failure_code'))}: {esc(run.get('error'))}</span>"
    parts.append(head + "</p>")
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

    pending = detail.get("pending")
    if pending and run["status"] == "paused_waiting_human":
        q = pending.get("questions") or {}
        asks = q.get("instructions") or q.get("question") or ""
        fields = q.get("fields") or [{"name": "answer", "type": "string"}]
        parts.append(f"<h2>Waiting on {esc(pending.get('node'))}</h2><div class=box id=question>"
                     f"<pre class=asks>{esc(asks)}</pre><form id=answer-form data-run='{rid}'>"
                     + "".join(_field_input(f) for f in fields)
                     + "<button type=submit id=answer-submit>Answer and resume</button> "
                       "<span id=answer-result></span></form></div>")

    hint = run.get("workspace_checkpoint")
    if hint:
        parts.append("<h2>Recovery hint</h2><div class=box id=recovery-hint>"
                     f"<p>latest pushed workspace checkpoint: <code>{esc(hint['ref'])}</code> at "
                     f"<code>{esc(hint['commit'])}</code> (event {esc(hint['seq'])}, {esc(hint['time'])})</p>"
                     f"<pre>{esc(hint['fetch_command'])}\n{esc(hint['verify'])}</pre></div>")

    rows = []
    for i, x in enumerate(detail.get("executions") or []):
        files = x.get("files") or []
        shown = "".join(f"<div>{esc(p)}</div>" for p in files[:50]) + (
            f"<div class=muted>… {len(files) - 50} more</div>" if len(files) > 50 else "")
        dur = "" if x.get("duration_s") is None else f"{x['duration_s']:.2f}s"
        # warnings of this execution (a tool_output_mismatch...), one line each
        warned = "".join(f"<div class='err warning'>{esc(w.get('code') or 'warning')}: {esc(w.get('message'))}</div>"
                         for w in x.get("warnings") or [])
        preview = (f"<button class=preview data-node='{esc(x['node'])}'>preview rewind</button>"
                   if x.get("status") in ("finished", "failed", "paused") else "")
        rows.append(f"<tr class=execution data-node='{esc(x['node'])}' data-iteration='{esc(x['iteration'])}'>"
                    f"<td>{i + 1}</td><td class=node>{esc(x['node'])}</td><td>{esc(x['iteration'])}</td>"
                    f"<td>{esc(x.get('kind'))}</td><td>{esc((x.get('start') or '')[11:23])}</td><td>{dur}</td>"
                    f"<td>{_status(x['status'])}{warned}</td><td class=files>{shown}</td><td>{preview}</td></tr>")
    parts.append("<h2>Timeline</h2><table id=timeline><thead><tr><th>#</th><th>node</th><th>iteration</th>"
                 "<th>kind</th><th>start</th><th>duration</th><th>status</th><th>files changed</th><th></th></tr>"
                 f"</thead><tbody>{''.join(rows)}</tbody></table>")

    bounds = "".join(f"<tr><td>{esc(b['seq'])}</td><td><code>{esc(b['label'])}</code></td>"
                     f"<td><code>{esc((b.get('state') or '')[:16])}</code></td><td>{esc(b['time'][11:23])}</td></tr>"
                     for b in detail.get("boundaries") or [])
    parts.append(f"<h2>Boundaries</h2><table id=boundaries><thead><tr><th>event</th><th>label</th><th>state</th>"
                 f"<th>time</th></tr></thead><tbody>{bounds}</tbody></table>")
    return "".join(parts)


SCRIPT = """<script>
(function(){
var runId = document.body.getAttribute('data-run'), lastSeq = +document.body.getAttribute('data-seq');
function show(el, text, bad){ el.textContent = text; el.className = bad ? 'err' : 'muted'; }
function post(path, body){
  return fetch('/api/runs/' + encodeURIComponent(runId) + path, {method:'POST', credentials:'same-origin',
    headers:{'Content-Type':'application/json'}, body:JSON.stringify(body)})
    .then(function(r){ return r.json().then(function(j){ return {ok:r.ok, status:r.status, body:j}; }); });
}
function version(){ var v = document.getElementById('version'); return v ? +v.textContent : undefined; }
var refreshing = false, again = false;
function refresh(){
  if (refreshing) { again = true; return; }
  refreshing = true;
  fetch('/runs/' + encodeURIComponent(runId) + '?fragment=1', {credentials:'same-origin'})
    .then(function(r){ return r.ok ? r.text() : null; })
    .then(function(t){ if (t !== null && !document.getElementById('answer-busy')) {
      document.getElementById('live').innerHTML = t; bind(); } })
    .finally(function(){ refreshing = false; if (again) { again = false; refresh(); } });
}
function coerce(el){
  var t = el.getAttribute('data-type'), v = el.value;
  if (t === 'bool') return v === 'true';
  if ((t === 'int' || t === 'float') && v !== '') return Number(v);
  return v;
}
function bind(){
  var form = document.getElementById('answer-form');
  if (form) form.onsubmit = function(ev){
    ev.preventDefault();
    var answers = {}, els = form.querySelectorAll('[name]');
    for (var i = 0; i < els.length; i++) answers[els[i].name] = coerce(els[i]);
    var out = document.getElementById('answer-result');
    show(out, 'resuming…'); out.id = 'answer-busy';
    post('/resume', {answers:answers, expected_version:version()}).then(function(r){
      out.id = 'answer-result';
      show(out, r.ok ? 'answered: the run resumed' : (r.body.error + (r.body.hint ? ' (' + r.body.hint + ')' : '')), !r.ok);
      if (r.ok) setTimeout(refresh, 300);
    });
  };
  var ops = document.querySelectorAll('button.op');
  for (var j = 0; j < ops.length; j++) ops[j].onclick = function(){
    var action = this.getAttribute('data-action'), out = document.getElementById('op-result');
    show(out, action + '…');
    post('/' + action, action === 'resume' ? {expected_version:version()} : {wait:0, expected_version:version()})
      .then(function(r){ show(out, r.ok ? action + ': ' + (r.body.status || 'requested') : r.body.error, !r.ok);
                         setTimeout(refresh, 300); });
  };
  var buttons = document.querySelectorAll('button.preview');
  for (var i = 0; i < buttons.length; i++) buttons[i].onclick = function(){ preview(this.getAttribute('data-node')); };
}
function preview(node){
  var box = document.getElementById('rewind');
  box.innerHTML = '<p class=muted>computing the rewind preview…</p>';
  post('/rewind', {node:node, dry_run:true}).then(function(r){
    box.innerHTML = '';
    if (!r.ok) { var p = document.createElement('p'); show(p, r.body.error, true); box.appendChild(p); return; }
    var f = r.body.files || {}, h = document.createElement('p');
    h.textContent = 'rewind to ' + r.body.to_node + ' drops ' + (r.body.dropped_nodes || []).join(', ') +
      '; files (' + (f.scope || '') + ') that would be restored:';
    box.appendChild(h);
    var ul = document.createElement('ul'); ul.id = 'rewind-files';
    (f.in_scope || []).forEach(function(p){ var li = document.createElement('li'); li.textContent = p; ul.appendChild(li); });
    if (!(f.in_scope || []).length) { var li = document.createElement('li'); li.textContent = '(no files)'; ul.appendChild(li); }
    box.appendChild(ul);
    var b = document.createElement('button'); b.id = 'rewind-do'; b.textContent = 'Rewind to ' + node;
    b.onclick = function(){ post('/rewind', {node:node, expected_version:version()}).then(function(x){
      var p = document.createElement('p'); p.id = 'rewind-result';
      show(p, x.ok ? ('rewound to ' + x.body.to_node + ': status ' + x.body.status) : x.body.error, !x.ok);
      box.appendChild(p); refresh(); }); };
    box.appendChild(b);
  });
}
bind();
if (window.EventSource) {
  var es = new EventSource('/api/runs/' + encodeURIComponent(runId) + '/events?follow=1&until=never&after=' + lastSeq);
  es.onmessage = refresh;
  ['node_started','node_finished','node_failed','run_paused','run_finished','run_failed','run_cancelled',
   'run_resumed','run_rewound','human_input_requested','boundary_written','run_workspace_checkpoint']
    .forEach(function(t){ es.addEventListener(t, refresh); });
}
})();
</script>"""


def run_page(detail: dict[str, Any]) -> str:
    run = detail["run"]
    body = (f"<h1>{esc(run['name'])} <span class=muted>{esc(run['workflow_name'])}</span></h1>"
            f"<p class=muted>run <code>{esc(run['id'])}</code> · workspace <code>{esc(run['workspace_dir'])}</code> "
            f"({esc(run['workspace_mode'])})</p>"
            f"<div id=live>{live_section(detail)}</div><h2>Rewind preview</h2><div class=box id=rewind>"
            "<p class=muted>Pick “preview rewind” on a node of the timeline: the dry run lists the files "
            "the rewind would restore, with a button that performs it.</p></div>")
    page = _shell(f"iterion: {run['name']}", body, SCRIPT)
    return page.replace("<body>", f"<body data-run='{esc(run['id'])}' data-seq='{int(detail.get('last_seq') or 0)}'>", 1)
