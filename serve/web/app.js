// The scc web page: the file's tree, a dataset's details and a viewer of a
// 2-D slice of it, following the file while its writer extends it. Plain
// script, no build step; everything it loads comes from this server.
'use strict';

const params = new URLSearchParams(location.search);
const token = params.get('token');
const pollMS = Math.max(200, Number(params.get('poll')) || 1000);

// api is the URL of one of the page's resources, carrying the token the
// page itself was opened with.
function api(path, query) {
  const u = new URL('__scc/' + path, location.href);
  for (const [k, v] of Object.entries(query || {})) u.searchParams.set(k, v);
  if (token) u.searchParams.set('token', token);
  return u;
}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k != null) e.append(k);
  return e;
}

function bytes(n) {
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + ' ' + u[i];
}

const dims = (s) => '[' + s.join(' × ') + ']';
const maxDims = (s) => '[' + s.map((n) => (n < 0 ? '∞' : n)).join(' × ') + ']';

let tree = null;     // the last tree document
let treeSig = '';    // what the tree list shows, to redraw it only when it changes
let view = null;     // the viewer's state: {name, x, y, idx, follow, auto, min, max, cmap}
let imageSeq = 0;    // the last image request, so a late answer does not overwrite a newer one
let imageKey = '';   // what the shown image is of

function status(msg, err) {
  const s = document.getElementById('status');
  s.textContent = msg;
  s.className = err ? 'err' : '';
}

async function poll() {
  try {
    const r = await fetch(api('tree'), { cache: 'no-store' });
    if (!r.ok) throw new Error('tree: ' + r.status + ' ' + (await r.text()));
    tree = await r.json();
    status('');
    render();
  } catch (e) {
    status(String(e.message || e), true);
  }
  setTimeout(poll, pollMS);
}

function render() {
  const c = tree.cache;
  document.getElementById('summary').textContent =
    `Zarr v${tree.zarr_format} · ${tree.datasets.length} datasets · generation ${tree.generation} · ` +
    `cache ${bytes(c.resident_bytes)} of ${bytes(c.active_limit)}, ${c.hits} hits, ${c.misses} misses`;
  document.body.dataset.generation = tree.generation;
  const sig = JSON.stringify(tree.groups.map((g) => g.path)) +
    JSON.stringify(tree.datasets.map((d) => [d.name, d.type, d.shape, d.zarr_left_out || '']));
  if (sig !== treeSig) {
    treeSig = sig;
    drawTree();
  }
  if (view) {
    const d = tree.datasets.find((x) => x.name === view.name);
    if (d) showDetail(d); else { view = null; document.getElementById('detail').replaceChildren(el('p', { class: 'hint' }, 'The dataset is gone.')); }
  }
  document.body.dataset.ready = '1';
}

// drawTree lists the groups and datasets as a nested list.
function drawTree() {
  const root = { kids: new Map(), path: '' };
  const node = (path) => {
    let n = root;
    if (path === '') return n;
    let p = '';
    for (const seg of path.split('/')) {
      p = p ? p + '/' + seg : seg;
      if (!n.kids.has(seg)) n.kids.set(seg, { kids: new Map(), path: p });
      n = n.kids.get(seg);
    }
    return n;
  };
  for (const g of tree.groups) node(g.path).group = g;
  for (const d of tree.datasets) node(d.name).ds = d;
  const list = (n) => {
    const ul = el('ul');
    for (const [seg, k] of [...n.kids.entries()].sort((a, b) => a[0].localeCompare(b[0]))) {
      if (k.ds) {
        const d = k.ds;
        const li = el('li', { class: 'ds' + (d.zarr_left_out ? ' left-out' : '') + (view && view.name === d.name ? ' selected' : ''), 'data-name': d.name, title: d.name },
          el('span', { class: 'label', onclick: () => select(d.name) },
            el('span', { class: 'name' }, seg),
            el('span', { class: 'meta' }, d.type + ' ' + dims(d.shape))));
        ul.append(li);
      }
      if (k.kids.size || (k.group && !k.ds)) {
        ul.append(el('li', { class: 'group', 'data-path': k.path }, el('span', { class: 'label' }, seg + '/'), list(k)));
      }
    }
    return ul;
  };
  document.getElementById('tree').replaceChildren(list(root));
}

function select(name) {
  const d = tree.datasets.find((x) => x.name === name);
  if (!d) return;
  const r = d.shape.length;
  view = { name, x: r - 1, y: r - 2, idx: new Array(r).fill(0), follow: new Array(r).fill(false), auto: true, min: 0, max: 1, cmap: 'gray' };
  imageKey = '';
  for (const li of document.querySelectorAll('nav li.ds')) li.classList.toggle('selected', li.dataset.name === name);
  document.getElementById('detail').replaceChildren();
  showDetail(d);
  saveURL();
}

// saveURL keeps the viewer's state in the address, so the view can be
// shared and reloaded.
function saveURL() {
  const q = new URLSearchParams();
  if (token) q.set('token', token);
  if (params.get('poll')) q.set('poll', params.get('poll'));
  if (view) {
    q.set('ds', view.name);
    q.set('x', view.x);
    q.set('y', view.y);
    q.set('i', view.idx.join(','));
    q.set('cmap', view.cmap);
    if (!view.auto) { q.set('min', view.min); q.set('max', view.max); }
  }
  history.replaceState(null, '', '?' + q.toString());
}

function table(rows) {
  return el('table', null, ...rows.filter((r) => r).map(([k, v, cls]) => el('tr', null, el('th', null, k), el('td', cls ? { class: cls } : null, v))));
}

// showDetail draws (first time) or updates the detail panel of d.
function showDetail(d) {
  const box = document.getElementById('detail');
  let info = box.querySelector('#info');
  if (!info) {
    info = el('div', { id: 'info' });
    box.replaceChildren(el('h2', null, d.name), info);
    if (d.no_image) box.append(el('p', { class: 'why', id: 'no-image' }, 'No image: ' + d.no_image + '.'));
    else box.append(viewerControls(d));
  }
  const st = d.storage || {};
  const ca = d.cache || {};
  const ratio = st.stored_bytes ? (d.raw_bytes / st.stored_bytes).toFixed(2) + '×' : '–';
  info.replaceChildren(
    table([
      ['type', d.type], ['layout', d.layout], ['shape', dims(d.shape)],
      d.max_shape ? ['max shape', maxDims(d.max_shape)] : null,
      d.chunk ? ['chunk', dims(d.chunk)] : null,
      ['filters', d.filters.length ? d.filters.join(' → ') : 'none'],
      ['Zarr', d.zarr_left_out ? 'left out: ' + d.zarr_left_out : d.zarr_chunks],
      ['storage', st.error ? st.error : `${st.chunks} chunks, ${bytes(st.stored_bytes || 0)} stored (${ratio} of ${bytes(d.raw_bytes)}), index ${bytes(st.index_bytes || 0)}`],
      ['cache', `${bytes(ca.resident_bytes || 0)} resident in ${ca.chunks || 0} chunks, ${ca.hits || 0} hits, ${ca.misses || 0} misses`],
    ]),
    el('h3', null, 'attributes'),
    Object.keys(d.attrs || {}).length
      ? table(Object.entries(d.attrs).map(([k, v]) => [k, JSON.stringify(v), 'json']))
      : el('p', { class: 'hint' }, 'none'));
  if (!d.no_image) updateViewer(d);
}

function viewerControls(d) {
  const r = d.shape.length;
  const opt = (n, sel) => el('option', Object.assign({ value: n }, n === sel ? { selected: '' } : {}), n < 0 ? 'none' : 'dim ' + n);
  const ctl = el('div', { class: 'controls', id: 'controls' });
  if (r >= 2) {
    const xs = el('select', { id: 'xdim', onchange: (e) => setDims(Number(e.target.value), view.y) });
    const ys = el('select', { id: 'ydim', onchange: (e) => setDims(view.x, Number(e.target.value)) });
    for (let i = 0; i < r; i++) { xs.append(opt(i, view.x)); ys.append(opt(i, view.y)); }
    ctl.append(el('label', null, 'columns ', xs), el('label', null, 'rows ', ys));
  }
  const cm = el('select', { id: 'cmap', onchange: (e) => { view.cmap = e.target.value; changed(); } });
  for (const n of ['gray', 'viridis', 'inferno']) cm.append(el('option', Object.assign({ value: n }, n === view.cmap ? { selected: '' } : {}), n));
  const auto = el('input', { type: 'checkbox', id: 'auto', onchange: (e) => { view.auto = e.target.checked; changed(); } });
  auto.checked = view.auto;
  const num = (id, key) => {
    const i = el('input', { type: 'number', id, step: 'any', onchange: (e) => { view[key] = Number(e.target.value); view.auto = false; auto.checked = false; changed(); } });
    i.value = view[key];
    return i;
  };
  ctl.append(el('label', null, 'colour map ', cm), el('label', null, auto, ' auto contrast'), el('label', null, 'min ', num('min', 'min')), el('label', null, 'max ', num('max', 'max')));
  const sliders = el('div', { class: 'controls', id: 'sliders' });
  const img = el('img', { id: 'slice', alt: 'slice of ' + d.name });
  return el('div', { id: 'viewer' }, ctl, sliders, img, el('div', { id: 'slice-info' }));
}

function setDims(x, y) {
  if (x === y) return;
  view.x = x; view.y = y;
  imageKey = '';
  changed();
}

function changed() {
  saveURL();
  const d = tree.datasets.find((x) => x.name === view.name);
  if (d) updateViewer(d);
}

// updateViewer fits the sliders to d's current extent (a slider following
// the last index moves with it) and loads the image if anything it shows
// changed: the slice, the contrast, the colour map or the file.
function updateViewer(d) {
  const sliders = document.getElementById('sliders');
  if (!sliders) return;
  const want = d.shape.map((n, k) => (k === view.x || k === view.y ? null : n));
  if (sliders.dataset.dims !== JSON.stringify([view.x, view.y])) {
    sliders.dataset.dims = JSON.stringify([view.x, view.y]);
    sliders.replaceChildren();
    want.forEach((n, k) => {
      if (n === null) return;
      const out = el('span', { id: 'idx' + k });
      const s = el('input', { type: 'range', id: 'slider' + k, min: 0, max: Math.max(0, n - 1), value: Math.min(view.idx[k], Math.max(0, n - 1)),
        oninput: (e) => { view.idx[k] = Number(e.target.value); view.follow[k] = false; fw.checked = false; changed(); } });
      const fw = el('input', { type: 'checkbox', id: 'follow' + k, onchange: (e) => { view.follow[k] = e.target.checked; changed(); } });
      fw.checked = view.follow[k];
      sliders.append(el('label', null, 'dim ' + k + ' ', s, ' ', out, ' ', fw, ' last'));
    });
  }
  let empty = false;
  want.forEach((n, k) => {
    if (n === null) return;
    if (n === 0) { empty = true; return; }
    const s = document.getElementById('slider' + k);
    s.max = n - 1;
    if (view.follow[k]) view.idx[k] = n - 1;
    view.idx[k] = Math.min(view.idx[k], n - 1);
    s.value = view.idx[k];
    document.getElementById('idx' + k).textContent = view.idx[k] + ' / ' + (n - 1);
  });
  if (view.x >= 0 && d.shape[view.x] === 0) empty = true;
  if (view.y >= 0 && d.shape[view.y] === 0) empty = true;
  const info = document.getElementById('slice-info');
  if (empty) { info.textContent = 'The slice is empty (extent ' + dims(d.shape) + ').'; return; }
  const q = { ds: view.name, x: view.x, y: view.y, i: view.idx.join(','), cmap: view.cmap };
  if (!view.auto) { q.min = view.min; q.max = view.max; }
  const key = JSON.stringify([q, tree.generation, d.shape]);
  if (key === imageKey) return;
  imageKey = key;
  loadImage(q);
}

async function loadImage(q) {
  const seq = ++imageSeq;
  const info = document.getElementById('slice-info');
  try {
    const r = await fetch(api('slice.png', q), { cache: 'no-store' });
    if (!r.ok) throw new Error(r.status + ' ' + (await r.text()));
    const blob = await r.blob();
    if (seq !== imageSeq) return;
    const img = document.getElementById('slice');
    const old = img.src;
    img.onload = () => {
      document.body.dataset.image = String(seq);
      if (old.startsWith('blob:')) URL.revokeObjectURL(old);
    };
    img.src = URL.createObjectURL(blob);
    const lo = r.headers.get('X-Scc-Min'), hi = r.headers.get('X-Scc-Max'), step = r.headers.get('X-Scc-Step');
    if (view.auto) {
      document.getElementById('min').value = lo;
      document.getElementById('max').value = hi;
      view.min = Number(lo); view.max = Number(hi);
    }
    info.textContent = `range ${lo} … ${hi}` + (step !== '1' ? ` · every ${step}th element` : '');
    info.classList.remove('err');
  } catch (e) {
    if (seq === imageSeq) info.textContent = 'No image: ' + (e.message || e);
  }
}

// The address may name a view: ?ds=NAME&x=&y=&i=&min=&max=&cmap=.
async function start() {
  try {
    const r = await fetch(api('tree'), { cache: 'no-store' });
    if (!r.ok) throw new Error('tree: ' + r.status + ' ' + (await r.text()));
    tree = await r.json();
  } catch (e) {
    status(String(e.message || e), true);
    setTimeout(poll, pollMS);
    return;
  }
  const name = params.get('ds');
  if (name && tree.datasets.some((d) => d.name === name)) {
    const d = tree.datasets.find((x) => x.name === name);
    const r = d.shape.length;
    view = { name, x: r - 1, y: r - 2, idx: new Array(r).fill(0), follow: new Array(r).fill(false), auto: true, min: 0, max: 1, cmap: 'gray' };
    const int = (k, def) => (params.has(k) && Number.isInteger(Number(params.get(k))) ? Number(params.get(k)) : def);
    view.x = int('x', view.x);
    view.y = int('y', view.y);
    const idx = (params.get('i') || '').split(',').map(Number);
    if (idx.length === r && idx.every((n) => Number.isInteger(n) && n >= 0)) view.idx = idx;
    if (params.has('min') && params.has('max')) { view.auto = false; view.min = Number(params.get('min')); view.max = Number(params.get('max')); }
    if (['gray', 'viridis', 'inferno'].includes(params.get('cmap'))) view.cmap = params.get('cmap');
    for (const k of (params.get('follow') || '').split(',')) if (k !== '' && Number(k) < r) view.follow[Number(k)] = true;
  }
  render();
  setTimeout(poll, pollMS);
}

start();
