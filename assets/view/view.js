// view.js — the kdflow view page: draws the graph Graphviz laid out at write time (positions in
// the embedded JSON, docs/view.md), and reacts: select, fold, search, dependencies, colours.
// d3 (v3, inlined beside this script) gives pan/zoom and the colour scales. No network, no
// storage: everything is in the page.
(function () {
  'use strict';
  var t0 = performance.now();
  var D = JSON.parse(document.getElementById('kdflow-data').textContent);
  var tParsed = performance.now();
  var K = D.kernels, C = D.calls, B = D.buffers, X = D.boxes, L = D.links;
  var HEADER = 38, ROW = 16;
  var FAMILY = {
    'conv': '#f4cccc', 'dense': '#c9daf8', 'sort': '#d9d2e9', 'reduction': '#f9cb9c', 'pooling': '#b4a7d6',
    'data movement': '#d0e0e3', 'elementwise': '#fff2cc', 'other': '#eeeeee'
  };

  function esc(s) {
    return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
  }
  function cut(s, n) { s = String(s); return s.length > n ? s.slice(0, n - 1) + '…' : s; }
  // Kernel and function names differ at their ends (…_kernel_2): keep both ends.
  function mid(s, n) {
    s = String(s);
    if (s.length <= n) return s;
    var tail = Math.min(14, Math.floor(n / 3));
    return s.slice(0, n - tail - 1) + '…' + s.slice(s.length - tail);
  }
  function bytes(b) {
    if (b === undefined || b === null) return '—';
    if (b < 1024) return b + ' B';
    if (b < 1048576) return (b / 1024).toFixed(1) + ' KiB';
    if (b < 1073741824) return (b / 1048576).toFixed(1) + ' MiB';
    return (b / 1073741824).toFixed(2) + ' GiB';
  }
  function count(v) {
    if (v === undefined || v === null) return '—';
    if (v >= 1e12) return (v / 1e12).toFixed(2) + ' T';
    if (v >= 1e9) return (v / 1e9).toFixed(2) + ' G';
    if (v >= 1e6) return (v / 1e6).toFixed(2) + ' M';
    if (v >= 1e3) return (v / 1e3).toFixed(2) + ' k';
    return String(v);
  }
  function dims(d) { return d.join('×'); }
  function us(v) { return (v >= 100 ? v.toFixed(0) : v.toPrecision(3)) + ' µs'; }

  // --- the summary ---------------------------------------------------------------------
  document.getElementById('title').textContent = (D.title || 'kdflow') + ' — kernel-level dataflow';
  document.getElementById('summary').innerHTML = D.summary.map(function (s) {
    return '<div><dt>' + esc(s[0]) + '</dt><dd>' + esc(s[1]) + '</dd></div>';
  }).join('');

  // --- indices ---------------------------------------------------------------------------
  var rowOf = {};  // 'k12' / 'c3' → [box, row]
  // A box's rows in launch order: a library call comes right after the kernel launched before it.
  function rows(b) {
    var r = b.kernels.map(function (k) { return [k, 1, 'k' + k]; })
      .concat(b.calls.map(function (c) { return [C[c].after_kernel, 2, 'c' + c]; }));
    r.sort(function (x, y) { return x[0] - y[0] || x[1] - y[1] || (x[2] < y[2] ? -1 : 1); });
    return r.map(function (x) { return x[2]; });
  }
  X.forEach(function (b, i) {
    if (b.node === undefined) return;
    b.rows = rows(b);
    b.rows.forEach(function (id, r) { rowOf[id] = [i, r]; });
  });
  var consumers = {};  // buffer → boxes reading it
  X.forEach(function (b, i) {
    (b.inputs || []).forEach(function (buf) { (consumers[buf] = consumers[buf] || []).push(i); });
  });
  // Dependencies: 'k1' / 'c0' → [{id, kind, buf}] up (what it depends on) and down.
  var up = {}, down = {}, KIND = ['RAW', 'WAR', 'WAW'];
  for (var i = 0; i < D.deps.length; i += 5) {
    var f = (D.deps[i + 3] ? 'c' : 'k') + D.deps[i], t = (D.deps[i + 4] ? 'c' : 'k') + D.deps[i + 1];
    (up[t] = up[t] || []).push({ id: f, kind: KIND[D.deps[i + 2]] });
    (down[f] = down[f] || []).push({ id: t, kind: KIND[D.deps[i + 2]] });
  }
  function launch(id) { return id[0] === 'k' ? K[+id.slice(1)] : C[+id.slice(1)]; }

  function lodOf(scale) { return scale < 0.12 ? 2 : scale < 0.3 ? 1 : 0; }
  function fitted() {
    var w = view.w, h = view.h;
    var s = Math.min(1, Math.max(0.01, Math.min(w / D.size[0], h / D.size[1])));
    return { s: s, t: [(w - D.size[0] * s) / 2, Math.max(0, (h - D.size[1] * s) / 2)] };
  }

  // --- drawing: one SVG string, set once (fast for 10,000 launches) -----------------------
  var svgEl = document.getElementById('graph');
  var vp = document.getElementById('viewport');
  var view = { w: svgEl.clientWidth || 800, h: svgEl.clientHeight || 600 };  // the canvas, px
  // The first view is fitted before the graph is built: measuring the canvas then costs nothing,
  // and every box is written with its level of detail, so 10,000 rows are not laid out twice.
  var first = fitted();
  var lod = lodOf(first.s);
  var lodClass = ['', ' lod', ' lod lod2'];
  var parts = ['<g class="edges' + (lod >= 1 ? ' lod' : '') + '">'];
  L.forEach(function (l, i) {
    parts.push('<path class="edge" data-e="' + i + '" d="' + l.d + '" marker-end="url(#arrow)"/>');
  });
  L.forEach(function (l, i) { parts.push('<path class="hit" data-e="' + i + '" d="' + l.d + '"/>'); });
  L.forEach(function (l, i) {
    var b = B[l.buffer];
    if (b) parts.push('<text class="elabel" x="' + (l.label[0] + 4) + '" y="' + (l.label[1] + 3) + '">' + bytes(b.bytes) + '</text>');
  });
  parts.push('</g><g class="boxes">');
  X.forEach(function (b, i) {
    var tr = 'translate(' + b.x + ',' + b.y + ')';
    if (b.node === undefined) {
      var buf = B[b.buffer];
      parts.push('<g class="box terminal ' + b.terminal + lodClass[lod] + '" data-b="' + i + '" transform="' + tr + '">' +
        '<rect class="frame" rx="12" width="' + b.w + '" height="' + b.h + '"/>' +
        '<text x="' + (b.w / 2) + '" y="17" text-anchor="middle">' + esc(mid(b.terminal + ' ' + buf.name, 24)) +
        '</text></g>');
      return;
    }
    var title = b.function && b.function !== '__nop' && b.function !== '__copy' ? b.function : b.name;
    var rows = b.kernels.length + b.calls.length;
    var sub = (b.ops.length ? b.ops.join(', ') + ' · ' : '') + b.kernels.length + ' launch' +
      (b.kernels.length === 1 ? '' : 'es') + (b.calls.length ? ', ' + b.calls.length + ' call' : '') +
      (b.workspaces.length ? ', ' + b.workspaces.length + ' ws' : '');
    var chars = Math.floor((b.w - 28) / 6.6);
    var s = '<g class="box' + lodClass[lod] + '" data-b="' + i + '" transform="' + tr + '">' +
      '<rect class="frame" rx="4" width="' + b.w + '" height="' + b.h + '" fill="' + (FAMILY[b.family] || '#eee') + '"/>' +
      '<g class="head"><text x="18" y="15">' + esc(mid('n' + b.node + ' ' + title, chars)) + '</text>' +
      '<text class="sub" x="18" y="30">' + esc(cut(sub, chars + 4)) +
      '<tspan class="folded-note"> (folded)</tspan></text></g>' +
      (rows ? '<text class="fold" x="5" y="15"><tspan class="is-open">▾</tspan><tspan class="is-folded">▸</tspan></text>' : '');
    var y = HEADER;
    b.rows.forEach(function (id) {
      var n = +id.slice(1);
      if (id[0] === 'k') {
        var kk = K[n];
        s += '<g class="kernel" data-k="' + n + '" transform="translate(6,' + y + ')"><rect width="' + (b.w - 12) +
          '" height="' + (ROW - 2) + '"/><text x="3" y="10.5">' + esc(mid('k' + n + ' ' + kk.name, chars - 12)) +
          '</text><text class="sub" x="' + (b.w - 15) + '" y="11" text-anchor="end">' + esc(dims(kk.grid) + '·' + kk.block[0]) +
          '</text></g>';
      } else {
        s += '<g class="call" data-c="' + n + '" transform="translate(6,' + y + ')"><rect width="' + (b.w - 12) +
          '" height="' + (ROW - 2) + '"/><text x="3" y="10.5">' + esc(mid('c' + n + ' ' + C[n].name, chars - 2)) + '</text></g>';
      }
      y += ROW;
    });
    parts.push(s + '</g>');
  });
  parts.push('</g>');
  var tBuilt = performance.now();
  vp.setAttribute('transform', 'translate(' + first.t + ')scale(' + first.s + ')');
  vp.innerHTML = parts.join('');
  var tDom = performance.now();
  var boxEls = vp.querySelectorAll('.box');
  var kernelEls = [], callEls = [];
  Array.prototype.forEach.call(vp.querySelectorAll('.kernel'), function (e) { kernelEls[+e.getAttribute('data-k')] = e; });
  Array.prototype.forEach.call(vp.querySelectorAll('.call'), function (e) { callEls[+e.getAttribute('data-c')] = e; });
  var edgeEls = vp.querySelectorAll('path.edge');
  var edgesEl = vp.querySelector('.edges');
  function launchEl(id) { return id[0] === 'k' ? kernelEls[+id.slice(1)] : callEls[+id.slice(1)]; }

  // --- pan and zoom (d3) -----------------------------------------------------------------
  var svg = d3.select(svgEl);
  // Culling: boxes wholly outside the view (with a margin) are not displayed, so that zooming
  // into a 10,000-launch graph lays out and shapes the text of what is on screen only.
  // Level of detail (lodOf): below 30% text is under 4 px (not drawn, nor shaped); below 12% a
  // launch's row is under 2 px (rows not drawn: the node's box carries the colour). Both are
  // classes on each box, set only on the boxes on screen (boxLod: the level each box carries):
  // a class on the root would restyle every element of the graph.
  var off = new Uint8Array(X.length), boxLod = new Int8Array(X.length).fill(lod);
  function cull(s, t) {
    var m = 300 / s, x0 = -t[0] / s - m, y0 = -t[1] / s - m, x1 = x0 + view.w / s + 2 * m, y1 = y0 + view.h / s + 2 * m;
    for (var i = 0; i < X.length; ++i) {
      var b = X[i], o = b.x > x1 || b.x + b.w < x0 || b.y > y1 || b.y + b.h < y0 ? 1 : 0, e = boxEls[i];
      if (o !== off[i]) {
        off[i] = o;
        e.classList.toggle('off', o === 1);
        if (!o) e.classList.toggle('folded', folded[i] === 1);
      }
      if (!o && boxLod[i] !== lod) {
        boxLod[i] = lod;
        e.classList.toggle('lod', lod >= 1);
        e.classList.toggle('lod2', lod === 2);
      }
    }
  }
  function setLod(scale) {
    var l = lodOf(scale);
    if (l === lod) return;
    lod = l;
    edgesEl.classList.toggle('lod', l >= 1);
  }
  var zoom = d3.behavior.zoom().scaleExtent([0.01, 4]).on('zoom', function () {
    vp.setAttribute('transform', 'translate(' + d3.event.translate + ')scale(' + d3.event.scale + ')');
    setLod(d3.event.scale);
    cull(d3.event.scale, d3.event.translate);
  });
  window.addEventListener('resize', function () {
    view.w = svgEl.clientWidth || 800;
    view.h = svgEl.clientHeight || 600;
    cull(zoom.scale(), zoom.translate());
  });
  svg.call(zoom).on('dblclick.zoom', null);
  function fit() {
    var f = fitted();
    zoom.scale(f.s).translate(f.t);
    zoom.event(svg);
  }
  function centre(x, y, scale) {
    var w = view.w, h = view.h;
    var s = scale || Math.max(zoom.scale(), 0.8);
    zoom.scale(s).translate([w / 2 - x * s, h / 2 - y * s]);
    zoom.event(svg);
  }
  function where(kind, id) {
    if (kind === 'box') { var b = X[id]; return [b.x + b.w / 2, b.y + Math.min(b.h, HEADER) / 2]; }
    if (kind === 'buffer') {
      for (var i = 0; i < L.length; ++i) if (L[i].buffer === id) { var f = X[L[i].from], t = X[L[i].to];
        return [(f.x + f.w / 2 + t.x + t.w / 2) / 2, (f.y + f.h + t.y) / 2]; }
      return null;
    }
    var r = rowOf[(kind === 'kernel' ? 'k' : 'c') + id];
    if (!r) return null;
    var bx = X[r[0]];
    return [bx.x + bx.w / 2, bx.y + HEADER + r[1] * ROW + ROW / 2];
  }

  // --- colours -----------------------------------------------------------------------------
  var legend = document.getElementById('legend');
  function colourBy(mode, initial) {
    var get = {
      flops: function (o) { return o.flops; }, bytes: function (o) { return o.bytes; },
      time: function (o) { return o.time_us; }, roofline: function (o) { return o.roofline; }
    }[mode];
    if (!get) {
      if (!initial) Array.prototype.forEach.call(kernelEls, function (e) { if (e) e.firstChild.setAttribute('style', ''); });
      if (!initial) Array.prototype.forEach.call(boxEls, function (e, i) {
        var b = X[e.getAttribute('data-b')];
        if (b.node !== undefined) e.firstChild.setAttribute('fill', FAMILY[b.family] || '#eee');
      });
      legend.innerHTML = Object.keys(FAMILY).map(function (f) {
        return '<span><i style="background:' + FAMILY[f] + '"></i>' + esc(f) + '</span>';
      }).join('');
      return;
    }
    var vals = K.map(get).filter(function (v) { return v !== undefined && v > 0; });
    var bvals = X.map(get).filter(function (v) { return v !== undefined && v > 0; });
    if (!vals.length && !bvals.length) {
      legend.textContent = mode === 'time' || mode === 'roofline'
        ? 'no measured times: pass --timing or --profile to kdflow view' : 'no values';
    }
    function scaleOf(v) {
      if (mode === 'roofline')  // bound / measured, log: 0.1% red, 3% yellow, 100% green
        return d3.scale.log().domain([0.001, 0.03, 1]).range(['#d73027', '#fee08b', '#1a9850']).clamp(true);
      var lo = d3.min(v) || 1, hi = d3.max(v) || 1;
      if (hi <= lo) hi = lo * 10;
      return d3.scale.log().domain([lo, hi]).range(['#f7fbff', '#08519c']).interpolate(d3.interpolateLab).clamp(true);
    }
    var ks = scaleOf(vals), bs = scaleOf(bvals);
    K.forEach(function (k, i) {
      var v = get(k), e = kernelEls[i];
      if (e) e.firstChild.setAttribute('style', 'fill:' + (v !== undefined && v > 0 ? ks(v) : '#eeeeee'));
    });
    Array.prototype.forEach.call(boxEls, function (e) {
      var b = X[e.getAttribute('data-b')];
      if (b.node === undefined) return;
      var v = get(b);
      e.firstChild.setAttribute('fill', v !== undefined && v > 0 ? bs(v) : '#f4f4f4');
    });
    if (vals.length) {
      var fmt = mode === 'bytes' ? bytes : mode === 'roofline' ? function (v) { return (100 * v).toPrecision(2) + '%'; }
        : mode === 'time' ? function (v) { return v.toFixed(1) + ' µs'; } : count;
      var d = ks.domain();
      legend.innerHTML = '<span><i style="background:' + ks(d[0]) + '"></i>' + fmt(d[0]) + '</span>' +
        '<span><i style="background:' + ks(d[d.length - 1]) + '"></i>' + fmt(d[d.length - 1]) + '</span>' +
        '<span><i style="background:#eeeeee"></i>unknown</span>';
    }
  }
  var colourSel = document.getElementById('color-by');
  colourSel.addEventListener('change', function () { colourBy(colourSel.value); });

  // --- selection and the side panel ----------------------------------------------------------
  var panel = document.getElementById('panel');
  var selected = null, selectedEl = null;
  var btnUp = document.getElementById('deps-up'), btnDown = document.getElementById('deps-down');
  function link(kind, id, text) {
    return '<a data-go="' + kind + ':' + id + '">' + esc(text) + '</a>';
  }
  function bufferLink(b) { return b >= 0 && B[b] ? link('buffer', b, B[b].name) : '—'; }
  function range(r) { return r ? '[' + r[0] + ', ' + r[1] + ')' : ''; }
  function footprint(f) {
    if (!f) return '';
    if (f.unknown) return 'unknown: ' + esc(f.unknown);
    var s = [];
    if (f.read) s.push('reads ' + range(f.read) + (f.read_bytes !== undefined ? ' (' + bytes(f.read_bytes) + ')' : ''));
    if (f.write) s.push('writes ' + range(f.write) + (f.write_bytes !== undefined ? ' (' + bytes(f.write_bytes) + ')' : ''));
    if (f.exact === false) s.push('superset');
    return esc(s.join('; '));
  }
  function argsTable(args) {
    return '<table class="args"><tr><th>#</th><th>type</th><th>buffer / value</th><th>access</th><th>footprint</th></tr>' +
      args.map(function (a, i) {
        if (a.buffer === undefined)
          return '<tr><td>' + i + '</td><td>' + esc(a.dtype) + '</td><td class="mono">' + esc(a.value) + '</td><td></td><td></td></tr>';
        var b = B[a.buffer];
        return '<tr class="arg-buffer"><td>' + i + '</td><td>' + esc(a.dtype) + '</td><td>' + bufferLink(a.buffer) +
          (b ? ' <span class="sub">' + esc(b.kind) + ', ' + bytes(b.bytes) + (a.offset ? ', +' + a.offset : '') + '</span>' : '') +
          (a.tensor ? '<br><span class="mono">' + esc(a.tensor) + '</span>' : '') +
          '</td><td class="access">' + esc(a.access) + '</td><td>' + footprint(a.footprint) + '</td></tr>';
      }).join('') + '</table>';
  }
  function costRows(o) {
    var r = [['FLOPs', o.flops !== undefined ? count(o.flops) + ' (' + (o.flops_source || '') + ')' : '—'],
             ['bytes', bytes(o.bytes)]];
    if (o.bound_us !== undefined) r.push(['roofline bound (' + (D.device || '') + ')', us(o.bound_us) + ', ' + o.limiter]);
    if (o.predicted_us !== undefined)
      r.push(['predicted from code (' + (D.device || '') + ')', (o.predicted_source === 'floor' ? '≥ ' : '') +
              us(o.predicted_us) + (o.predicted_limiter ? ', ' + esc(o.predicted_limiter) : '') +
              (o.predicted_source && o.predicted_source !== 'code' && o.predicted_source !== 'floor' ? ' (' + esc(o.predicted_source) + ')' : '')]);
    if (o.time_us !== undefined) r.push(['measured', us(o.time_us) + (D.measured_source ? ' (' + D.measured_source + ')' : '')]);
    if (o.roofline !== undefined) r.push(['fraction of bound', (100 * o.roofline).toFixed(1) + '%']);
    return r;
  }
  function dl(rows) {
    return '<table>' + rows.map(function (r) { return '<tr><th>' + esc(r[0]) + '</th><td>' + r[1] + '</td></tr>'; }).join('') + '</table>';
  }
  function depList(list) {
    if (!list || !list.length) return '<p>none</p>';
    var seen = {}, out = [];
    list.forEach(function (d) {
      if (d.kind !== 'RAW' || seen[d.id]) return;
      seen[d.id] = 1;
      var l = launch(d.id);
      out.push(link(d.id[0] === 'k' ? 'kernel' : 'call', +d.id.slice(1), d.id + ' ' + (l ? l.name : '?')));
    });
    return out.length ? '<p>' + out.join('<br>') + '</p>' : '<p>none (RAW)</p>';
  }
  function clearSel() {
    if (selectedEl) selectedEl.classList.remove('sel');
    selectedEl = null;
  }
  function select(kind, id, pan) {
    clearSel();
    selected = { kind: kind, id: id };
    var h = '';
    if (kind === 'kernel' || kind === 'call') {
      var k = kind === 'kernel' ? K[id] : C[id];
      if (!k) return;
      var box = X[k.box], key = (kind === 'kernel' ? 'k' : 'c') + id;
      selectedEl = launchEl(key);
      h = '<h2>' + esc(k.name) + '</h2>' + dl([
        [kind === 'kernel' ? 'launch' : 'library call', key],
        ['node', box ? link('box', k.box, 'n' + box.node + ' ' + box.name) : String(k.node)],
        ['function', esc(box ? box.function : '')],
        ['ops fused', esc(box && box.ops.length ? box.ops.join(', ') : '—')]
      ].concat(kind === 'kernel' ? [['grid', dims(k.grid)], ['block', dims(k.block)],
        ['dynamic shared memory', bytes(k.smem)]].concat(k.loop ? [['host loop iteration', k.loop.join(', ')]] : [])
        .concat(costRows(k)) : [['after launch', k.after_kernel >= 0 ? link('kernel', k.after_kernel, 'k' + k.after_kernel) : '—']]
          .concat(k.collective ? [['collective', esc(k.collective)], ['sent per rank', bytes(k.bytes)]] : []))) +
        '<h3>Arguments</h3>' + argsTable(k.args) +
        '<h3>Producers (what it reads was written by)</h3>' + depList(up[key]) +
        '<h3>Consumers (what it writes is read by)</h3>' + depList(down[key]);
    } else if (kind === 'box') {
      var b = X[id];
      selectedEl = boxEls[id];
      if (b.node === undefined) return select('buffer', b.buffer, pan);
      h = '<h2>n' + b.node + ' ' + esc(b.name) + '</h2>' + dl([
        ['function', esc(b.function)], ['ops fused', esc(b.ops.join(', ') || '—')], ['operator family', esc(b.family)]]
        .concat(b.cuda_graph ? [['CUDA graph', esc(b.cuda_graph)]] : [])
        .concat(b.session_step ? [['session step', esc(b.session_step)]] : []).concat(costRows(b))) +
        '<h3>Launches, in order</h3><p>' + (b.rows.map(function (id) {
          var n = +id.slice(1);
          return id[0] === 'k' ? link('kernel', n, id + ' ' + K[n].name) : link('call', n, id + ' ' + C[n].name);
        }).join('<br>') || 'none') + '</p>' +
        '<h3>Inputs</h3><p>' + (b.inputs.map(function (x) { return bufferLink(x) + ' ' + bytes(B[x] && B[x].bytes) + ' ' + esc(B[x] ? B[x].kind : ''); }).join('<br>') || 'none') + '</p>' +
        '<h3>Outputs</h3><p>' + (b.outputs.map(function (x) { return bufferLink(x) + ' ' + bytes(B[x] && B[x].bytes); }).join('<br>') || 'none') + '</p>' +
        '<h3>Workspaces</h3><p>' + (b.workspaces.map(function (x) { return bufferLink(x) + ' ' + bytes(B[x] && B[x].bytes); }).join('<br>') || 'none') + '</p>';
    } else if (kind === 'buffer') {
      var f = B[id];
      if (!f) return;
      var users = [];
      K.forEach(function (k) {
        k.args.forEach(function (a, i) { if (a.buffer === id) users.push(link('kernel', k.id, 'k' + k.id + ' ' + k.name) + ' arg ' + i + ' ' + esc(a.access)); });
      });
      C.forEach(function (c) {
        c.args.forEach(function (a, i) { if (a.buffer === id) users.push(link('call', c.id, 'c' + c.id + ' ' + c.name) + ' arg ' + i); });
      });
      var prod = -1;
      X.forEach(function (b, i) { if (b.node === f.node) prod = i; });
      h = '<h2>' + esc(f.name) + '</h2>' + dl([['kind', esc(f.kind)], ['dtype', esc(f.dtype)], ['shape', esc('[' + f.shape.join(', ') + ']')],
        ['bytes', bytes(f.bytes) + ' (' + f.bytes + ')'], ['storage id', f.storage_id !== undefined ? String(f.storage_id) : '— (workspace)'],
        ['produced by', prod >= 0 ? link('box', prod, 'n' + X[prod].node + ' ' + X[prod].name) : '—'],
        ['read by nodes', (consumers[id] || []).map(function (i) { return link('box', i, 'n' + X[i].node + ' ' + X[i].name); }).join('<br>') || '—']]
        .concat(f.view_of !== undefined ? [['view of', bufferLink(f.view_of)]] : [])) +
        '<h3>Launches passing it</h3><p>' + (users.join('<br>') || 'none') + '</p>';
      Array.prototype.forEach.call(edgeEls, function (e) { e.classList.toggle('sel', L[+e.getAttribute('data-e')].buffer === id); });
    }
    if (selectedEl) selectedEl.classList.add('sel');
    panel.innerHTML = h;
    document.getElementById('zoom-sel').disabled = false;
    btnUp.disabled = btnDown.disabled = !(kind === 'kernel' || kind === 'call' || (kind === 'box' && X[id].node !== undefined));
    if (pan) { var p = where(kind, id); if (p) centre(p[0], p[1]); }
  }
  panel.addEventListener('click', function (ev) {
    var a = ev.target.closest('[data-go]');
    if (!a) return;
    var g = a.getAttribute('data-go').split(':');
    unfoldFor(g[0], +g[1]);
    select(g[0], +g[1], true);
  });

  // --- folding ------------------------------------------------------------------------------------
  // The fold state lives here; a box's 'folded' class follows it while the box is displayed
  // (culled boxes catch up when they come back into view: cull), so folding all nodes of a
  // 10,000-launch graph touches only what is on screen.
  var folded = new Uint8Array(X.length);
  function isFolded(i) { return folded[i] === 1; }
  function setFold(i, f) {
    if (X[i].node === undefined) return;
    folded[i] = f ? 1 : 0;
    if (!off[i]) boxEls[i].classList.toggle('folded', !!f);
  }
  function foldAll(f) {
    for (var i = 0; i < X.length; ++i) if (X[i].node !== undefined) setFold(i, f);
  }
  function unfoldFor(kind, id) {
    var r = rowOf[(kind === 'kernel' ? 'k' : kind === 'call' ? 'c' : 'x') + id];
    if (r) setFold(r[0], false);
  }
  document.getElementById('fold-all').addEventListener('click', function () { foldAll(true); });
  document.getElementById('unfold-all').addEventListener('click', function () { foldAll(false); });

  // --- clicks on the graph (delegated) ------------------------------------------------------------
  vp.addEventListener('click', function (ev) {
    var t = ev.target;
    var fold = t.closest('.fold');
    if (fold) { var bx = fold.closest('.box'); var bi = +bx.getAttribute('data-b'); setFold(bi, !isFolded(bi)); return; }
    var k = t.closest('[data-k]');
    if (k) return select('kernel', +k.getAttribute('data-k'));
    var c = t.closest('[data-c]');
    if (c) return select('call', +c.getAttribute('data-c'));
    var e = t.closest('[data-e]');
    if (e) return select('buffer', L[+e.getAttribute('data-e')].buffer);
    var b = t.closest('[data-b]');
    if (b) return select('box', +b.getAttribute('data-b'));
  });
  var tip = document.getElementById('tip');
  vp.addEventListener('mousemove', function (ev) {
    var t = ev.target, s = '';
    var k = t.closest('[data-k]'), e = t.closest('[data-e]'), c = t.closest('[data-c]');
    if (k) { var kk = K[+k.getAttribute('data-k')]; s = 'k' + kk.id + ' ' + kk.name + '  grid ' + dims(kk.grid) + ' block ' + dims(kk.block); }
    else if (c) s = C[+c.getAttribute('data-c')].name;
    else if (e) { var bb = B[L[+e.getAttribute('data-e')].buffer]; s = bb ? bb.name + ' · ' + bb.kind + ' · ' + bytes(bb.bytes) + (bb.storage_id !== undefined ? ' · storage ' + bb.storage_id : '') : ''; }
    if (!s) { tip.style.display = 'none'; return; }
    var r = svgEl.getBoundingClientRect();
    tip.textContent = s;
    tip.style.left = (ev.clientX - r.left + 12) + 'px';
    tip.style.top = (ev.clientY - r.top + 12) + 'px';
    tip.style.display = 'block';
  });
  vp.addEventListener('mouseleave', function () { tip.style.display = 'none'; });

  // --- dependencies: the transitive closure, highlighted -------------------------------------------
  var highlighted = [];
  function clearHighlight() {
    svgEl.classList.remove('dim');
    highlighted.forEach(function (e) { e.classList.remove('hl'); });
    highlighted = [];
  }
  function closure(starts, adj) {
    var seen = {}, stack = starts.slice();
    starts.forEach(function (s) { seen[s] = 1; });
    while (stack.length) {
      var x = stack.pop();
      (adj[x] || []).forEach(function (d) { if (!seen[d.id]) { seen[d.id] = 1; stack.push(d.id); } });
    }
    return Object.keys(seen);
  }
  function showDeps(adj) {
    if (!selected) return;
    var starts = [];
    if (selected.kind === 'kernel') starts = ['k' + selected.id];
    else if (selected.kind === 'call') starts = ['c' + selected.id];
    else if (selected.kind === 'box') {
      var b = X[selected.id];
      starts = b.kernels.map(function (k) { return 'k' + k; }).concat(b.calls.map(function (c) { return 'c' + c; }));
    }
    clearHighlight();
    var ids = closure(starts, adj);
    svgEl.classList.add('dim');
    ids.forEach(function (id) {
      var e = launchEl(id), r = rowOf[id];
      if (e) { e.classList.add('hl'); highlighted.push(e); }
      if (r) { boxEls[r[0]].classList.add('hl'); highlighted.push(boxEls[r[0]]); }
    });
    if (selected.kind === 'box') { boxEls[selected.id].classList.add('hl'); highlighted.push(boxEls[selected.id]); }
    document.getElementById('search-count').textContent = (ids.length - starts.length) + ' launches';
  }
  btnUp.addEventListener('click', function () { showDeps(up); });
  btnDown.addEventListener('click', function () { showDeps(down); });
  document.getElementById('clear').addEventListener('click', function () {
    clearHighlight(); clearMatches(); clearSel();
    Array.prototype.forEach.call(edgeEls, function (e) { e.classList.remove('sel'); });
    document.getElementById('search-count').textContent = '';
  });
  document.getElementById('fit').addEventListener('click', fit);
  document.getElementById('zoom-sel').addEventListener('click', function () {
    if (!selected) return;
    var p = where(selected.kind, selected.id);
    if (p) centre(p[0], p[1], 1.2);
  });

  // --- search -----------------------------------------------------------------------------------------
  var searchEl = document.getElementById('search'), matches = [], matchEls = [];
  var names = K.map(function (k) { return k.name.toLowerCase(); });
  function clearMatches() { matchEls.forEach(function (e) { e.classList.remove('match'); }); matchEls = []; }
  function search(q) {
    clearMatches();
    matches = [];
    q = q.trim().toLowerCase();
    if (!q) { document.getElementById('search-count').textContent = ''; return; }
    var m = /^([kcn])(\d+)$/.exec(q);
    if (m) {
      if (m[1] === 'k' && K[+m[2]]) matches.push(['kernel', +m[2]]);
      if (m[1] === 'c' && C[+m[2]]) matches.push(['call', +m[2]]);
      if (m[1] === 'n') X.forEach(function (b, i) { if (b.node === +m[2]) matches.push(['box', i]); });
    }
    names.forEach(function (n, i) { if (n.indexOf(q) >= 0) matches.push(['kernel', i]); });
    C.forEach(function (c, i) { if (c.name.toLowerCase().indexOf(q) >= 0) matches.push(['call', i]); });
    X.forEach(function (b, i) {
      if (b.node !== undefined && ((b.name || '').toLowerCase().indexOf(q) >= 0 || (b.function || '').toLowerCase().indexOf(q) >= 0))
        matches.push(['box', i]);
    });
    B.forEach(function (b, i) { if (b.name.toLowerCase().indexOf(q) >= 0) matches.push(['buffer', i]); });
    matches.forEach(function (x) {
      var e = x[0] === 'kernel' ? kernelEls[x[1]] : x[0] === 'call' ? callEls[x[1]] : x[0] === 'box' ? boxEls[x[1]] : null;
      if (e) { e.classList.add('match'); matchEls.push(e); }
    });
    document.getElementById('search-count').textContent = matches.length + ' match' + (matches.length === 1 ? '' : 'es');
  }
  var pending = null;
  searchEl.addEventListener('input', function () {
    clearTimeout(pending);
    pending = setTimeout(function () { search(searchEl.value); }, 120);
  });
  searchEl.addEventListener('keydown', function (ev) {
    if (ev.key !== 'Enter') return;
    clearTimeout(pending);
    search(searchEl.value);
    if (matches.length) { unfoldFor(matches[0][0], matches[0][1]); select(matches[0][0], matches[0][1], true); }
  });

  colourBy('family', true);
  zoom.scale(first.s).translate(first.t);
  // For tests and benchmarks: when the first frame with the graph was painted.
  window.kdflowView = { launches: K.length, calls: C.length, startMs: t0, parseMs: tParsed - t0,
    select: function (kind, id) { unfoldFor(kind, id); select(kind, id, true); },
    zoomTo: function (x, y, s) { centre(x, y, s); },
    folded: function (i) { return isFolded(i); },
    buildMs: tBuilt - tParsed, domMs: tDom - tBuilt, scriptMs: performance.now() };
  requestAnimationFrame(function () {
    requestAnimationFrame(function () { window.kdflowView.paintedMs = performance.now(); });
  });
})();
