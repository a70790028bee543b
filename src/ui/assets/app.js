// lf-train's live page: polls /api/state every second and draws it; charts are plain SVG. Every
// value from the job goes into the page as text (textContent), never as markup.
'use strict';

const token = new URLSearchParams(location.search).get('token');
const POLL_MS = 1000;
let selectedRank = null;
let previewDone = false;
let lastState = null;

function api(path) {
  const url = token ? path + (path.includes('?') ? '&' : '?') + 'token=' + encodeURIComponent(token) : path;
  return fetch(url, {cache: 'no-store'}).then(r => {
    if (!r.ok) return r.text().then(t => { throw new Error(r.status + ': ' + t); });
    return r.json();
  });
}

// el('td', {class: 'x', 'data-rank': 3}, 'text', child, ...)
function el(tag, attrs, ...children) {
  const svg = ['svg', 'path', 'line', 'text', 'circle', 'g', 'rect', 'polyline'].includes(tag);
  const e = svg ? document.createElementNS('http://www.w3.org/2000/svg', tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined && v !== false) e.setAttribute(k, v);
  for (const c of children) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}

function fmt(v, digits) {
  if (v === null || v === undefined || Number.isNaN(v)) return '–';
  if (typeof v !== 'number') return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
  return v.toFixed(digits === undefined ? (a >= 100 ? 0 : a >= 1 ? 3 : 4) : digits);
}

function duration(s) {
  if (s === null || s === undefined || !isFinite(s)) return '–';
  s = Math.round(s);
  const h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60), sec = s % 60;
  return (h ? h + ':' + String(m).padStart(2, '0') : String(m)) + ':' + String(sec).padStart(2, '0');
}

function bytes(b) {
  if (b === null || b === undefined || b < 0) return '–';
  return (b / 2 ** 30).toFixed(1) + ' GiB';
}

function jobPhase(s) {
  const j = s.job;
  if (j.phase === 'finished') return j.exit_code === 0 ? 'done' : 'failed';
  if (s.mode === 'finished') return j.phase;
  return j.phase;
}

function drawHeader(s) {
  const j = s.job;
  document.getElementById('job-id').textContent = s.mode === 'live' ? (j.id === 'none' ? '' : 'job ' + j.id) : 'run ' + j.id;
  const phase = jobPhase(s);
  const badge = document.getElementById('job');
  badge.dataset.phase = phase;
  badge.textContent = phase + (s.mode === 'live' && j.generation > 0 ? ' · generation ' + j.generation +
    ' (' + j.restarts + ' restart' + (j.restarts === 1 ? '' : 's') + ' of ' + j.max_restarts + ')' : '');
  const facts = document.getElementById('facts');
  facts.replaceChildren(...(j.facts || []).map(([k, v]) => el('span', {class: 'fact'}, el('b', {}, k), ' ', v)));
  if (s.mode === 'live') {
    facts.append(el('span', {class: 'fact'}, el('b', {}, 'nodes'), ' ', j.nnodes + ' · world ' + j.world_size));
    if (j.end_reason) facts.append(el('span', {class: 'fact end'}, el('b', {}, 'ended'), ' ', j.end_reason));
    for (const w of j.waiting || []) facts.append(el('span', {class: 'fact'}, el('b', {}, 'waiting'), ' ', w));
  }
  const p = s.progress;
  const step = document.getElementById('step');
  step.dataset.step = p.step;
  step.textContent = 'step ' + p.step + (p.total_steps ? ' / ' + p.total_steps : '');
  const share = p.total_steps ? Math.min(1, p.step / p.total_steps) : 0;
  document.getElementById('step-bar').style.width = (100 * share).toFixed(1) + '%';
  const figures = [
    ['loss', fmt(p.loss)], ['eval loss', fmt(p.eval_loss)], ['learning rate', fmt(p.lr)],
    ['grad norm', fmt(p.grad_norm)], ['epoch', fmt(p.epoch, 2)],
    ['tokens/s', p.tokens_per_s === null ? '–' : Math.round(p.tokens_per_s).toLocaleString()],
    ['MFU', p.mfu === null ? '–' : (100 * p.mfu).toFixed(1) + '%'],
    ['ETA', duration(p.eta_s)],
    ['tokens', p.tokens === null ? '–' : Math.round(p.tokens).toLocaleString()],
  ];
  document.getElementById('figures').replaceChildren(...figures.map(([k, v]) =>
    el('div', {class: 'figure', 'data-figure': k}, el('div', {class: 'value'}, v), el('div', {class: 'label'}, k))));
}

function drawAlerts(s) {
  const active = (s.health && s.health.active) || [];
  const failures = s.failures || [];
  document.getElementById('alerts').hidden = active.length === 0 && failures.length === 0;
  document.getElementById('warnings').replaceChildren(...active.map(w =>
    el('li', {class: 'warning', 'data-key': w.key}, w.line)));
  const body = document.querySelector('#failures tbody');
  document.getElementById('failures').hidden = failures.length === 0;
  body.replaceChildren(...failures.map(f => el('tr', {class: 'failed', 'data-rank': f.rank},
    el('td', {}, new Date(f.t * 1000).toLocaleTimeString()), el('td', {}, f.generation), el('td', {}, f.node_rank),
    el('td', {}, f.rank >= 0 ? f.rank : '–'), el('td', {class: 'exit'}, f.exit || '–'), el('td', {}, f.message))));
}

function rankRow(r) {
  return el('tr', {class: 'rank ' + r.state + (r.flagged ? ' flagged' : ''), 'data-rank': r.rank, 'data-state': r.state,
                   'data-exit': r.exit || null},
    el('td', {}, r.rank), el('td', {}, r.local_rank), el('td', {}, r.pid),
    el('td', {class: 'state'}, r.state + (r.flagged ? ' ⚠' : '')), el('td', {}, r.phase || '–'),
    el('td', {class: 'num'}, r.step), el('td', {class: 'num'}, r.beat_age_s === null ? '–' : r.beat_age_s.toFixed(1) + ' s'),
    el('td', {class: 'exit'}, r.exit || '–'), el('td', {class: 'num'}, r.failures),
    el('td', {class: 'num'}, r.tokens_per_s === null ? '–' : Math.round(r.tokens_per_s).toLocaleString()),
    el('td', {class: 'num'}, r.mfu === null ? '–' : (100 * r.mfu).toFixed(1) + '%'),
    el('td', {class: 'num'}, fmt(r.step_s, 3)), el('td', {class: 'line'}, r.last_line));
}

function meter(ratio, text) {
  const fill = el('div', {class: 'fill'});
  fill.style.width = (ratio === null || ratio < 0 ? 0 : Math.min(1, ratio) * 100).toFixed(1) + '%';
  return el('div', {class: 'meter'}, fill, el('span', {}, text));
}

function gpuTable(n) {
  if (!n.gpus.length)
    return el('p', {class: 'gpu-note muted', 'data-node': n.node_rank},
      'No GPUs on this node' + (n.gpu_note ? ': ' + n.gpu_note.replace(/[.?!]$/, '') : ' (a CPU run)') + '.');
  const head = el('tr', {}, ...['GPU', 'model', 'utilisation', 'memory', 'temperature', 'power'].map(h => el('th', {}, h)));
  const rows = n.gpus.map(g => el('tr', {class: 'gpu' + (g.flagged ? ' flagged' : ''), 'data-gpu': g.index},
    el('td', {}, g.index), el('td', {}, g.name),
    el('td', {}, meter(g.util, g.util < 0 ? '–' : (100 * g.util).toFixed(0) + '%')),
    el('td', {}, meter(g.mem_total > 0 ? g.mem_used / g.mem_total : null, bytes(g.mem_used) + ' / ' + bytes(g.mem_total))),
    el('td', {class: 'num'}, g.temp < 0 ? '–' : g.temp.toFixed(0) + ' °C'),
    el('td', {class: 'num'}, g.power < 0 ? '–' : g.power.toFixed(0) + ' W')));
  return el('table', {class: 'grid gpus', id: 'gpus-' + n.node_rank}, el('thead', {}, head), el('tbody', {}, ...rows));
}

function nodeState(n, s) {
  if (n.done) return 'done';
  if (!n.connected) return 'lost';
  if (s.job.phase === 'finished') return 'ended';
  return 'up';
}

function drawNodes(s) {
  const box = document.getElementById('nodes');
  if (s.mode !== 'live') {
    box.replaceChildren(el('p', {class: 'muted'}, 'A run read from its output_dir: no live nodes. The running job\'s ' +
      'own page is node 0\'s --ui-port.'));
    return;
  }
  if (!s.nodes.length) {
    box.replaceChildren(el('p', {class: 'muted'}, 'Waiting for the nodes to join…'));
    return;
  }
  box.replaceChildren(...s.nodes.map(n => {
    const state = nodeState(n, s);
    const heard = n.silent_s === null ? (n.lost ? 'lost: ' + n.lost : 'not connected') : 'heard ' + n.silent_s.toFixed(1) + ' s ago';
    const head = el('h3', {}, 'node ' + n.node_rank, el('span', {class: 'host'}, n.hostname + ' · ' + n.address),
      el('span', {class: 'badge', 'data-phase': state}, state), el('span', {class: 'muted'}, heard));
    const cols = ['rank', 'local', 'pid', 'state', 'phase', 'step', 'heartbeat', 'exit', 'failures', 'tokens/s', 'MFU',
                  'step s', 'last line'];
    const ranks = el('table', {class: 'grid ranks'}, el('thead', {}, el('tr', {}, ...cols.map(c => el('th', {}, c)))),
      el('tbody', {}, ...n.ranks.map(rankRow)));
    return el('section', {class: 'node', 'data-node': n.node_rank, 'data-state': state}, head, ranks, gpuTable(n));
  }));
}

// One chart: series [{points: [[x, y]...], cls, dots}], axes with min/max labels.
function drawChart(id, series) {
  const svg = document.getElementById(id);
  const W = 600, H = 220, L = 56, R = 10, T = 10, B = 24;
  const all = series.flatMap(s => s.points);
  svg.replaceChildren();
  if (!all.length) {
    svg.append(el('text', {x: W / 2, y: H / 2, class: 'empty', 'text-anchor': 'middle'}, 'no points yet'));
    return;
  }
  let [x0, x1] = [Math.min(...all.map(p => p[0])), Math.max(...all.map(p => p[0]))];
  let [y0, y1] = [Math.min(...all.map(p => p[1])), Math.max(...all.map(p => p[1]))];
  if (x0 === x1) x1 = x0 + 1;
  if (y0 === y1) { y0 -= Math.abs(y0) * 0.1 || 1; y1 += Math.abs(y1) * 0.1 || 1; }
  const pad = (y1 - y0) * 0.05;
  y0 = y0 >= 0 && y0 - pad < 0 ? 0 : y0 - pad;  // a quantity that cannot go below 0 is not drawn below it
  y1 += pad;
  const X = x => L + (x - x0) / (x1 - x0) * (W - L - R);
  const Y = y => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
  const g = el('g', {class: 'axes'});
  for (let i = 0; i <= 4; ++i) {
    const y = y0 + (y1 - y0) * i / 4;
    g.append(el('line', {x1: L, x2: W - R, y1: Y(y), y2: Y(y), class: 'gridline'}),
             el('text', {x: L - 6, y: Y(y) + 4, 'text-anchor': 'end'}, fmt(y, Math.abs(y1 - y0) < 0.1 ? 4 : 3)));
  }
  // Step ticks: whole steps, each once (a short run has fewer than five).
  for (const x of new Set([0, 1, 2, 3, 4].map(i => Math.round(x0 + (x1 - x0) * i / 4))))
    g.append(el('text', {x: X(x), y: H - 6, 'text-anchor': 'middle'}, x));
  svg.append(g);
  for (const s of series) {
    if (!s.points.length) continue;
    const d = s.points.map((p, i) => (i ? 'L' : 'M') + X(p[0]).toFixed(1) + ' ' + Y(p[1]).toFixed(1)).join(' ');
    svg.append(el('path', {d, class: 'series ' + s.cls, 'data-points': s.points.length}));
    if (s.dots) for (const p of s.points) svg.append(el('circle', {cx: X(p[0]), cy: Y(p[1]), r: 3, class: 'dot ' + s.cls}));
  }
}

function drawCurves(s) {
  const c = s.curves;
  drawChart('chart-loss', [{points: c.loss, cls: 'loss'}, {points: c.eval_loss, cls: 'eval', dots: true}]);
  drawChart('chart-lr', [{points: c.lr, cls: 'lr'}]);
  drawChart('chart-grad_norm', [{points: c.grad_norm, cls: 'grad'}]);
}

function drawLogTabs(s) {
  const ranks = [...new Set(s.log_ranks || [])].sort((a, b) => a - b);
  if (selectedRank === null || !ranks.includes(selectedRank)) {
    // The first failed rank's lines say most; else rank 0's.
    const failed = (s.failures || []).find(f => f.rank >= 0);
    selectedRank = failed && ranks.includes(failed.rank) ? failed.rank : ranks.length ? ranks[0] : null;
  }
  if (!ranks.length)
    document.getElementById('logs').textContent = s.mode === 'live' ? 'no lines yet' :
      'no lines: lf-train ui OUTPUT_DIR --log-dir DIR shows the last lines the run kept under --log-dir DIR';
  document.getElementById('log-ranks').replaceChildren(...ranks.map(r => {
    const b = el('button', {class: r === selectedRank ? 'tab on' : 'tab', 'data-rank': r}, 'rank ' + r);
    b.addEventListener('click', () => { selectedRank = r; drawLogTabs(lastState); pollLogs(); });
    return b;
  }));
}

function pollLogs() {
  if (selectedRank === null) return;
  api('/api/logs?rank=' + selectedRank).then(l => {
    const pre = document.getElementById('logs');
    // Follow the newest lines unless the reader scrolled up (or chose another rank).
    const follow = pre.dataset.rank !== String(l.rank) || pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.dataset.rank = l.rank;
    pre.replaceChildren(...l.lines.map(x => el('span', {class: x.err ? 'err' : 'out'}, x.text + '\n')));
    if (follow) pre.scrollTop = pre.scrollHeight;
  }).catch(() => {});
}

function drawPreview(p) {
  const info = document.getElementById('preview-info');
  const box = document.getElementById('preview');
  box.dataset.state = p.state;
  if (p.state !== 'ready') {
    info.textContent = p.state === 'rendering' ? 'rendering the first examples…' :
      p.state === 'error' ? 'the preview failed: ' + p.error : p.why;
    return p.state !== 'rendering';
  }
  info.textContent = 'template ' + p.template + ', cutoff_len ' + p.cutoff_len + ', train_on_prompt ' +
    p.train_on_prompt + ', datasets ' + p.datasets.join(', ') + ': the first ' + p.samples.length + ' examples';
  box.replaceChildren(...p.samples.map((x, i) => el('div', {class: 'sample', 'data-sample': i},
    el('div', {class: 'sample-head'}, 'sample ' + i + ' (' + x.origin + '): ' + (x.dropped ? 'dropped (not a prompt/response pair)' :
      x.tokens + ' tokens, ' + x.trained + ' trained' + (x.truncated ? ', truncated to cutoff_len' : ''))),
    el('pre', {class: 'sample-text'}, ...x.segments.map(seg => el('span', {class: seg.masked ? 'masked' : 'trained'}, seg.text))))));
  return true;
}

function pollPreview() {
  api('/api/preview').then(p => { previewDone = drawPreview(p); if (!previewDone) setTimeout(pollPreview, 2000); })
    .catch(() => setTimeout(pollPreview, 4000));
}

function draw(s) {
  lastState = s;
  drawHeader(s);
  drawAlerts(s);
  drawNodes(s);
  drawCurves(s);
  drawLogTabs(s);
  document.getElementById('updated').textContent = 'updated ' + new Date(s.now * 1000).toLocaleTimeString();
}

function poll() {
  api('/api/state').then(s => {
    document.getElementById('banner').hidden = true;
    draw(s);
    pollLogs();
  }).catch(e => {
    const b = document.getElementById('banner');
    b.hidden = false;
    b.textContent = 'no answer from lf-train (' + e.message + '): the job ended or node 0 is gone; the last state ' +
      'it served stays below.';
  }).finally(() => setTimeout(poll, POLL_MS));
}

poll();
pollPreview();
