"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("data").textContent);
  const ITEMS = DATA.items;
  const QUESTIONS = DATA.questions;
  const KEY = "judge-eval-review:" + DATA.meta.key;
  const $ = (id) => document.getElementById(id);
  const INDEX = new Map(ITEMS.map((it, i) => [it.id, i]));

  // ------------------------------------------------------------------ state, kept in the browser
  let storageOk = true;
  function load() {
    try {
      const raw = window.localStorage.getItem(KEY);
      const s = raw ? JSON.parse(raw) : null;
      if (s && typeof s === "object" && s.decisions) return s;
    } catch (e) {
      storageOk = false;
    }
    return { decisions: {}, reviewer: "", dirty: false, current: null };
  }
  const state = load();
  function save() {
    try {
      window.localStorage.setItem(KEY, JSON.stringify(state));
      storageOk = true;
    } catch (e) {
      storageOk = false;
    }
    $("storage-warning").hidden = storageOk;
    $("storage-warning").textContent = storageOk ? "" :
      "This browser does not let the page keep your work: download the reviewed file before closing.";
  }

  // ------------------------------------------------------------------ filters
  let view = [];   // indices into ITEMS
  let pos = 0;     // position in view
  const runs = DATA.meta.runs || [];
  for (const r of runs) {
    const o = document.createElement("option");
    o.value = r; o.textContent = r;
    $("f-run").appendChild(o);
  }
  function decisionOf(it) { return state.decisions[it.id]; }
  function changed(it) {
    const d = decisionOf(it);
    return d !== undefined && d.grade !== it.proposed_grade;
  }
  function applyFilters(keepId) {
    const run = $("f-run").value;
    const q = $("f-question").value.trim().toLowerCase();
    const conf = $("f-confidence").value === "" ? null : parseFloat($("f-confidence").value);
    const status = $("f-status").value;
    view = [];
    for (let i = 0; i < ITEMS.length; i++) {
      const it = ITEMS[i];
      if (run && !(run in it.runs)) continue;
      if (conf !== null && !(it.confidence <= conf)) continue;
      if (status === "unreviewed" && decisionOf(it) !== undefined) continue;
      if (status === "reviewed" && decisionOf(it) === undefined) continue;
      if (status === "changed" && !changed(it)) continue;
      if (q) {
        const qq = QUESTIONS[it.question_id];
        if (it.question_id.toLowerCase() !== q && qq.question.toLowerCase().indexOf(q) < 0) continue;
      }
      view.push(i);
    }
    const at = keepId !== undefined && keepId !== null ? view.indexOf(INDEX.get(keepId)) : -1;
    pos = at >= 0 ? at : 0;
    render();
  }

  // ------------------------------------------------------------------ rendering
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function chunkNodes(text, evidence) {
    const chars = Array.from(text);  // offsets are code points
    const spans = [];
    for (const ev of evidence) for (const s of ev.spans) spans.push([s[0], s[1], ev.statement]);
    const cuts = new Set([0, chars.length]);
    for (const s of spans) { cuts.add(Math.max(0, Math.min(chars.length, s[0]))); cuts.add(Math.max(0, Math.min(chars.length, s[1]))); }
    const points = Array.from(cuts).sort((a, b) => a - b);
    const frag = document.createDocumentFragment();
    for (let k = 0; k + 1 < points.length; k++) {
      const a = points[k], b = points[k + 1];
      const piece = chars.slice(a, b).join("");
      const active = [];
      for (const s of spans) if (s[0] <= a && b <= s[1] && active.indexOf(s[2]) < 0) active.push(s[2]);
      if (active.length) {
        const m = el("mark", "", piece);
        m.title = "evidence for statement " + active.join(", ");
        const ends = spans.filter((s) => s[1] === b).map((s) => s[2]).filter((n) => active.indexOf(n) >= 0);
        if (ends.length) m.appendChild(el("sup", "", ends.join(",")));
        frag.appendChild(m);
      } else {
        frag.appendChild(document.createTextNode(piece));
      }
    }
    return frag;
  }
  function render() {
    const empty = view.length === 0;
    $("empty").hidden = !empty;
    $("left").hidden = empty;
    $("right").hidden = empty;
    $("position").textContent = empty ? "0 / 0" : (pos + 1) + " / " + view.length + (view.length < ITEMS.length ? " (filtered)" : "");
    renderProgress();
    if (empty) return;
    const it = ITEMS[view[pos]];
    const q = QUESTIONS[it.question_id];
    state.current = it.id;
    $("qid").textContent = it.question_id;
    $("question").textContent = q.question;
    const ol = $("statements");
    ol.textContent = "";
    if (!q.statements.length) ol.appendChild(el("li", "", "(no statements: the reference could not be decomposed)"));
    for (const s of q.statements) {
      const li = el("li", it.supported.indexOf(s.n) >= 0 ? "supported" : "", s.text);
      li.value = s.n;
      const ev = it.evidence.filter((e) => e.statement === s.n);
      for (const e of ev) {
        li.appendChild(el("span", "quote" + (e.spans.length ? "" : " missing"),
          "\u2713 supported: \u201c" + e.quote + "\u201d" + (e.spans.length ? "" : " (not located in the chunk)")));
      }
      ol.appendChild(li);
    }
    const judge = $("judge");
    judge.textContent = "";
    if (it.proposed_grade === null) {
      judge.appendChild(el("div", "big", "no proposal"));
      judge.appendChild(el("div", "", "The judge failed on this chunk (" + (it.error || "error") + "). Choose a grade."));
    } else {
      const head = el("div", "");
      head.appendChild(el("span", "big", "grade " + it.proposed_grade));
      if (it.judge_grade !== it.proposed_grade) head.appendChild(el("span", "muted", "  (judge said " + it.judge_grade + ", capped: no verified support)"));
      head.appendChild(el("span", "muted", "  \u00b7 confidence " + it.confidence.toFixed(2)));
      judge.appendChild(head);
    }
    const sig = el("div", "");
    for (const s of it.signals) sig.appendChild(el("span", "signal", s.replace(/_/g, " ")));
    judge.appendChild(sig);
    if (it.reason) judge.appendChild(el("div", "reason", it.reason));
    $("cid").textContent = it.chunk_id;
    $("runs").textContent = Object.keys(it.runs).map((r) => r + " #" + it.runs[r]).join(", ");
    const chunk = $("chunk");
    chunk.textContent = "";
    chunk.appendChild(chunkNodes(it.chunk_text, it.evidence));
    chunk.scrollTop = 0;
    const d = decisionOf(it);
    for (const b of document.querySelectorAll(".grade")) {
      const g = parseInt(b.dataset.grade, 10);
      b.classList.toggle("proposed", g === it.proposed_grade);
      b.classList.toggle("chosen", d !== undefined && d.grade === g);
      b.setAttribute("aria-pressed", d !== undefined && d.grade === g ? "true" : "false");
    }
    $("accept").disabled = it.proposed_grade === null;
    $("note").value = d && d.note ? d.note : "";
    const status = $("status");
    if (d === undefined) { status.textContent = "not reviewed yet"; status.className = ""; }
    else if (it.proposed_grade === null) { status.textContent = "graded " + d.grade; status.className = "changed"; }
    else if (d.grade === it.proposed_grade) { status.textContent = "kept the judge's grade " + d.grade; status.className = "kept"; }
    else { status.textContent = "changed " + it.proposed_grade + " \u2192 " + d.grade; status.className = "changed"; }
  }
  function renderProgress() {
    let reviewed = 0, kept = 0, up = 0, down = 0;
    for (const id in state.decisions) {
      const i = INDEX.get(id);
      if (i === undefined) continue;
      reviewed++;
      const p = ITEMS[i].proposed_grade, g = state.decisions[id].grade;
      if (p === null) continue;
      if (g === p) kept++; else if (g > p) up++; else down++;
    }
    $("progress").textContent = "reviewed " + reviewed + " of " + ITEMS.length + " \u00b7 kept " + kept +
      " \u00b7 changed up " + up + " \u00b7 changed down " + down;
    $("progress-fill").style.width = (ITEMS.length ? 100 * reviewed / ITEMS.length : 0) + "%";
    const saved = $("saved");
    saved.textContent = state.dirty ? "unsaved changes: download the reviewed file to keep them" :
      (reviewed ? "all changes downloaded" : "");
    saved.classList.toggle("dirty", !!state.dirty);
  }

  // ------------------------------------------------------------------ actions
  function currentItem() { return view.length ? ITEMS[view[pos]] : null; }
  function setGrade(g) {
    const it = currentItem();
    if (!it) return;
    state.decisions[it.id] = { grade: g, at: new Date().toISOString(), note: $("note").value || "" };
    state.dirty = true;
    save();
    render();
  }
  function clearGrade() {
    const it = currentItem();
    if (!it || state.decisions[it.id] === undefined) return;
    delete state.decisions[it.id];
    state.dirty = true;
    save();
    render();
  }
  function move(step) {
    if (!view.length) return;
    pos = Math.max(0, Math.min(view.length - 1, pos + step));
    render();
    save();
  }
  function nextUnreviewed() {
    for (let k = 1; k <= view.length; k++) {
      const p = (pos + k) % view.length;
      if (decisionOf(ITEMS[view[p]]) === undefined) { pos = p; render(); save(); return; }
    }
  }
  function accept() {
    const it = currentItem();
    if (!it || it.proposed_grade === null) return;
    setGrade(it.proposed_grade);
    move(1);
  }
  function download() {
    const reviewer = $("reviewer").value.trim();
    const lines = ITEMS.map((it) => {
      const d = state.decisions[it.id];
      return JSON.stringify({
        id: it.id, question_id: it.question_id, chunk_id: it.chunk_id, proposed_grade: it.proposed_grade,
        grade: d ? d.grade : null, reviewer: d ? (d.reviewer || reviewer || null) : null,
        reviewed_at: d ? d.at : null, note: d && d.note ? d.note : null,
      });
    });
    const blob = new Blob([lines.join("\n") + "\n"], { type: "application/x-ndjson" });
    const url = URL.createObjectURL(blob);
    const a = document.createElement("a");
    a.href = url;
    a.download = DATA.meta.download_name;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
    state.dirty = false;
    save();
    renderProgress();
  }

  // ------------------------------------------------------------------ wiring
  // a clicked button gives the focus back, so Enter and the digit keys act on the item, not on it
  for (const b of document.querySelectorAll("button")) b.addEventListener("click", () => b.blur());
  for (const b of document.querySelectorAll(".grade")) {
    b.addEventListener("click", () => { setGrade(parseInt(b.dataset.grade, 10)); move(1); });
  }
  $("accept").addEventListener("click", accept);
  $("clear").addEventListener("click", clearGrade);
  $("prev").addEventListener("click", () => move(-1));
  $("next").addEventListener("click", () => move(1));
  $("download").addEventListener("click", download);
  $("note").addEventListener("change", () => {
    const it = currentItem();
    const d = it && state.decisions[it.id];
    if (d) { d.note = $("note").value; state.dirty = true; save(); renderProgress(); }
  });
  $("reviewer").value = state.reviewer || "";
  $("reviewer").addEventListener("input", () => { state.reviewer = $("reviewer").value; save(); });
  for (const id of ["f-run", "f-confidence", "f-status"]) {
    $(id).addEventListener("change", () => applyFilters(state.current));
  }
  $("f-question").addEventListener("input", () => applyFilters(state.current));
  document.addEventListener("keydown", (e) => {
    const t = e.target;
    const typing = t && (t.tagName === "INPUT" || t.tagName === "SELECT" || t.tagName === "TEXTAREA");
    if (typing) {
      if (e.key === "Escape") t.blur();
      return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    let handled = true;
    if (e.key >= "0" && e.key <= "3" && e.key.length === 1) { setGrade(parseInt(e.key, 10)); move(1); }
    else if (e.key === "Enter") accept();
    else if (e.key === "ArrowRight" || e.key === "ArrowDown" || e.key === "j") move(1);
    else if (e.key === "ArrowLeft" || e.key === "ArrowUp" || e.key === "k") move(-1);
    else if (e.key === "n") nextUnreviewed();
    else if (e.key === "Backspace" || e.key === "Delete") clearGrade();
    else if (e.key === "/") $("f-question").focus();
    else handled = false;
    if (handled) e.preventDefault();
  });
  window.addEventListener("beforeunload", (e) => {
    if (state.dirty) {
      e.preventDefault();
      e.returnValue = "";
    }
  });

  $("source").textContent = DATA.meta.title;
  applyFilters(state.current);
  document.body.dataset.ready = "1";
  window.__reviewReadyMs = performance.now();
})();
